"""JSON lines column-wise: pyarrow.json parses blocks of whole lines into typed columns (typed_columns),
and what it reads differently from the row-wise reader's ``json.loads`` per line is handed back
(NotColumnar), so that reader names the bad record or reads the value as it always has:

- a line it cannot parse, a key twice in one object, text that is not UTF-8: pyarrow refuses it;
- two objects on one line, a byte order mark, a NUL byte after an object, ``-NaN``: pyarrow reads them,
  ``json.loads`` refuses them (the bytes are looked for anywhere: a text holding them is read row-wise);
- in a float64 column, ``-0`` (-0.0 to pyarrow, 0 to ``json.loads``), or an integer beyond 64 bits
  (an int to ``json.loads``) with no fraction beside it to make it a float column. pyarrow makes a
  column float64 only for such integers or for a number with a fraction or an exponent (a float to
  ``json.loads``), so without them a float64 column is a float column, whole numbers or not;
- an object, a list of lists or of objects: the row-wise reader names them as bad records.

A date-like text, which pyarrow reads as a timestamp, is read again as text (an explicit string column).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from tfxd.components.example_gen import typed_columns
from tfxd.components.example_gen.csv_columns import BLOCK_BYTES, NotColumnar

_REFUSED = (b"\xef\xbb\xbf", b"\x00", b"-NaN")


def batches(raw: BinaryIO, name: str) -> Iterator[pa.RecordBatch]:
    """Batches of plain columns, one per block of about BLOCK_BYTES of whole lines of ``raw``; ``name``
    names the file in NotColumnar's message. Nothing for text with no object in it."""
    while block := raw.read(BLOCK_BYTES):
        if not block.endswith(b"\n"):
            block += raw.readline()
        batch = block_batch(block, name)
        if batch.num_rows:
            yield batch


def block_batch(block: bytes, name: str) -> pa.RecordBatch:
    """The objects of ``block`` (whole lines) as one batch of plain columns."""
    import pyarrow.json as pjson

    if any(refused in block for refused in _REFUSED):
        raise NotColumnar(f"{name}: a byte order mark, a NUL or -NaN")
    options = pjson.ReadOptions(use_threads=False, block_size=len(block) + 1)
    try:
        table = pjson.read_json(io.BytesIO(block), read_options=options)
        dates = [field.name for field in table.schema if pa.types.is_timestamp(field.type)]
        if dates:
            as_text = pa.schema([(date, pa.string()) for date in dates])
            table = pjson.read_json(io.BytesIO(block), read_options=options, parse_options=pjson.ParseOptions(
                explicit_schema=as_text, unexpected_field_behavior="infer"))
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise NotColumnar(f"{name}: {exc}") from None
    if table.num_rows != _objects(block):
        raise NotColumnar(f"{name}: a line with more than one object")
    batch = typed_columns.plain(table)
    for column_name, column in zip(batch.schema.names, batch.columns, strict=True):
        values = column.flatten() if pa.types.is_list(column.type) else column
        if values.type == pa.float64() and _from_integers(values):
            raise NotColumnar(f"{name}: column {column_name!r} may hold integers json.loads reads as int")
    return batch


def _objects(block: bytes) -> int:
    """The lines of ``block`` with something on them: each holds one object at least once pyarrow has read
    it. A line that starts with "{" has one; the rare others (leading blanks) are looked at one by one."""
    data = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(data == ord("\n"))
    starts = np.concatenate(([0], ends + 1))
    stops = np.concatenate((ends, [len(data)]))
    filled = starts < stops
    starts, stops = starts[filled], stops[filled]
    opening = data[starts] == ord("{")
    others = zip(starts[~opening].tolist(), stops[~opening].tolist(), strict=True)
    return int(opening.sum()) + sum(1 for start, stop in others if block[start:stop].strip())


def _from_integers(column: pa.Array) -> bool:
    """Whether a float64 column may not be what ``json.loads`` reads: a -0 (or -0.0, which it cannot tell
    apart), or a number of 2**63 or more (maybe an integer's text) and no fraction (a float's text)."""
    values = column.drop_null().to_numpy()
    if np.signbit(values[values == 0]).any():
        return True
    return bool((np.abs(values) >= 2.0**63).any() and (values == np.floor(values)).all())
