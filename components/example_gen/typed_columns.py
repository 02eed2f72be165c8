"""Typed Arrow columns (Parquet's, JSON lines') in the few forms the column-wise encoder (csv_columns)
takes, each holding what the row-wise reader's ``records.plain_values`` makes of a value: int64 (any
integer, a bool as 0 or 1), float64 (NaN missing), string (text, read for numbers as CSV's is) and
binary (bytes), and lists of those (missing items dropped, an empty list missing). Any other type
(dates, decimals, structs, lists of lists) is left to the row-wise reader.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfxd.components.example_gen.csv_columns import NotColumnar


def plain(table: pa.Table) -> pa.RecordBatch:
    """``table`` as one batch of plain columns; NotColumnar for a type the row-wise reader must read."""
    columns = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        try:
            columns.append(_plain_column(name, column.combine_chunks()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:  # a uint64 beyond int64, not UTF-8
            raise NotColumnar(f"column {name!r}: {exc}") from None
    return pa.RecordBatch.from_arrays(columns, names=table.column_names)


def _plain_column(name: str, column: pa.Array) -> pa.Array:
    kind = column.type
    if pa.types.is_dictionary(kind):
        return _plain_column(name, column.dictionary_decode())
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return column.cast(pa.int64())
    if pa.types.is_floating(kind):
        numbers = column.cast(pa.float64())
        return pc.if_else(pc.is_nan(numbers), pa.scalar(None, pa.float64()), numbers)  # NaN: missing
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        column.validate(full=True)  # text that is not UTF-8: the row-wise reader decides
        return column.cast(pa.string())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return column.cast(pa.binary())
    if pa.types.is_null(kind):
        return pa.nulls(len(column), pa.string())
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _plain_list(name, column)
    raise NotColumnar(f"column {name!r} is {kind}")


def _plain_list(name: str, column: pa.Array) -> pa.Array:
    """A list column as ``records.plain_values`` makes its values: items plain, missing ones dropped, a
    list left empty missing. A NaN item is a bad record there ("NaN inside a list"), not a missing one."""
    flat = column.flatten()
    if pa.types.is_floating(flat.type) and pc.any(pc.is_nan(flat)).as_py():
        raise NotColumnar(f"column {name!r} has NaN in a list")
    items = _plain_column(name, flat)
    if pa.types.is_list(items.type):
        raise NotColumnar(f"column {name!r} holds lists of lists")
    present = items.is_valid()
    counts = np.bincount(pc.list_parent_indices(column).filter(present).to_numpy(), minlength=len(column))
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), items.filter(present), mask=pa.array(counts == 0))
