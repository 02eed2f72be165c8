"""CSV files column-wise: pyarrow reads them, the column kinds and values come from vectorized passes,
and each row's tf.Example bytes are assembled from per-column pieces, byte for byte the ones
``records.example_bytes`` writes for the same row (so a record's split hash is the same either way).

The row-wise reader of ``records`` stays the reference: anything this module is not sure to read exactly
as it does (a ragged or non-UTF-8 line, a header over several lines, a number that only Python parses,
a value that does not fit its column, a label that is not a class) raises ``NotColumnar``, and the
caller reads that file row by row, with the locations and reasons of bad records.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfxd import tfrecords
from tfxd.components.example_gen import records
from tfxd.components.example_gen.input_files import Opener
from tfxd.reader_config import LabelCheck

BLOCK_BYTES = 16 << 20  # one Arrow batch per this much CSV text: memory stays flat in the file's size
_INT = r"^[+-]?[0-9]+$"
_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_NAN = r"^[+-]?(?i:nan)$"  # the texts float() reads as NaN: missing in a number column
_EMPTY = pa.scalar(b"", pa.binary())


class NotColumnar(Exception):
    """This file needs the row-wise reader (which names what is wrong with it, if anything is)."""


def header(path: str, opener: Opener) -> list[str]:
    """The header as the row-wise reader reads it (names stripped, checked); a header spread over several
    lines (a quoted newline) is left to that reader."""
    csv.field_size_limit(records.CSV_FIELD_LIMIT)
    with opener(path) as raw:
        reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline=""))
        names = records.read_header(path, reader)
        if reader.line_num != 1:
            raise NotColumnar(f"{path}: the header spans several lines")
    return names


def batches(path: str, opener: Opener, names: list[str]) -> Iterator[pa.RecordBatch]:
    """The rows as batches of string columns, None where a field is empty (as the row-wise reader)."""
    import pyarrow.csv as pcsv

    read = pcsv.ReadOptions(column_names=names, skip_rows=1, block_size=BLOCK_BYTES, use_threads=False)
    parse = pcsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=True)
    convert = pcsv.ConvertOptions(column_types={name: pa.string() for name in names}, null_values=[""],
                                  strings_can_be_null=True, quoted_strings_can_be_null=True)
    with opener(path) as raw:
        try:
            reader = pcsv.open_csv(raw, read_options=read, parse_options=parse, convert_options=convert)
            rows = 0
            for batch in reader:
                rows += batch.num_rows
                if any(pc.any(pc.match_substring(column, "\x00")).as_py() for column in batch.columns):
                    raise NotColumnar(f"{path}: a line contains NUL")  # Python's csv refuses such lines
                yield batch
        except (pa.ArrowInvalid, UnicodeDecodeError) as exc:  # ragged lines, bytes that are not UTF-8
            raise NotColumnar(f"{path}: {exc}") from None
    if rows == 0:
        raise NotColumnar(f"{path} has no rows")


def kinds(batch: pa.RecordBatch, numeric: frozenset[str]) -> dict[str, str | None]:
    """Column -> the widest kind of its values in ``batch``, as ``records.TypeInferenceState.add`` finds
    it: texts' numbers by pattern, the rest by ``records.kind_of`` on the distinct values; a typed column
    (typed_columns: int64, float64, binary) is of its type's kind; a list column of its items' kind."""
    found: dict[str, str | None] = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        values = (column.flatten() if pa.types.is_list(column.type) else column).drop_null()
        typed = _TYPED_KINDS.get(values.type)
        seen: set[str | None] = set() if not len(values) else {typed} if typed else _text_kinds(values, name in numeric)
        if name in numeric:
            seen.discard("string")
        found[name] = records.widest(seen)
    return found


_TYPED_KINDS = {pa.int64(): "int", pa.float64(): "float", pa.binary(): "string"}
_HEAD = 1024  # values looked at first: a pattern they break, the whole column breaks too


def _text_kinds(values: pa.Array, numeric: bool) -> set[str | None]:
    """The kinds of a column of texts, whose widest is the column's kind: {"int"} where every value is an
    integer's text, {"float"} where every value is a plain number's text, else the kinds of its values
    one by one (``_each_kind``). The first ``_HEAD`` values are looked at first, and what they settle is
    not looked for in the rest: a pattern one of them breaks, the whole column breaks; and a value that is
    a string's (not a number's, nor NaN) makes the column's widest kind "string" whatever the others are
    (not in a ``numeric`` column, which leaves strings out). The same kinds as every value looked at,
    without the passes over the whole column that the head shows to be vain (on the taxi data's 125,000
    rows a batch: 0.21 -> 0.12 s)."""
    head = values.slice(0, _HEAD) if len(values) > _HEAD else None
    for kind, pattern in (("int", _INT), ("float", _FLOAT)):
        if (head is None or _all_match(head, pattern)) and _all_match(values, pattern):
            return {kind}
    if head is not None and not numeric and "string" in _each_kind(head):
        return {"string"}
    return _each_kind(values)


def _all_match(values: pa.Array, pattern: str) -> bool:
    return bool(pc.all(pc.match_substring_regex(values, pattern)).as_py())


def _each_kind(values: pa.Array) -> set[str | None]:
    """The kinds of the values one by one: "int" and "float" by pattern (NaN texts missing), the others by
    ``records.kind_of`` on the distinct values."""
    is_int = pc.match_substring_regex(values, _INT)
    is_float = pc.match_substring_regex(values, _FLOAT)
    is_nan = pc.match_substring_regex(values, _NAN)
    seen: set[str | None] = set()
    if pc.any(is_int).as_py():
        seen.add("int")
    if pc.any(pc.and_not(is_float, is_int)).as_py():
        seen.add("float")
    others = values.filter(pc.invert(pc.or_(is_float, is_nan)))
    return seen | {records.kind_of(value) for value in pc.unique(others).to_pylist()}


def example_bytes(batch: pa.RecordBatch, types: dict[str, str], label: LabelCheck | None) -> pa.Array:
    """Each row's serialized tf.Example (a binary array), with the features in key order and missing
    values left out."""
    cells = []
    for name in sorted(types, key=lambda key: key.encode("utf-8")):
        kind = types[name]
        index = batch.schema.get_field_index(name)
        column = batch.column(index) if index >= 0 else pa.nulls(batch.num_rows, pa.string())
        if pa.types.is_list(column.type):
            values = pa.ListArray.from_arrays(column.offsets, _typed(name, column.flatten(), kind),
                                              mask=column.is_null())
            if label and name == label.column and kind != "string":
                _check_classes(values.flatten(), label)
            cells.append(pc.fill_null(_list_entry(name, values, kind), _EMPTY))
            continue
        values = _typed(name, column, kind)
        if label and name == label.column and kind != "string":
            _check_classes(values, label)
        cells.append(pc.fill_null(_feature_entry(name, values, kind), _EMPTY))
    if not cells:
        return pa.array([b""] * batch.num_rows, pa.binary())
    features = pc.binary_join_element_wise(*cells, _EMPTY) if len(cells) > 1 else cells[0]
    sizes = pc.binary_length(features).to_numpy(zero_copy_only=False)
    examples = pc.binary_join_element_wise(pa.scalar(b"\x0a", pa.binary()), _varints(sizes), features, _EMPTY)
    return pc.if_else(pa.array(sizes > 0), examples, _EMPTY)  # nothing present: an Example with no features


def _typed(name: str, column: pa.Array, kind: str) -> pa.Array:
    """The column as its kind: strings as their UTF-8 bytes; numbers parsed, NaN texts missing. Anything
    else (words in a number column, infinities, integers beyond 64 bits) is left to the row-wise reader."""
    if column.type != pa.string():
        return _typed_values(name, column, kind)
    if kind == "string":
        return column.cast(pa.binary())
    try:  # the common case: every value parses (a NaN text in a float column too, made missing below)
        numbers = column.cast(pa.int64() if kind == "int" else pa.float64())
    except pa.ArrowInvalid:
        return _typed_by_pattern(name, column, kind)
    if kind == "int":
        return numbers
    numbers = pc.if_else(pc.is_nan(numbers), pa.scalar(None, pa.float64()), numbers)
    return _finite_float32(name, numbers)


def _typed_values(name: str, column: pa.Array, kind: str) -> pa.Array:
    """``_typed`` for a typed column (typed_columns): an int64 as any kind (``str`` of an int is Arrow's
    text of it), a float64 as float, or as int where every value is a whole number below 2**53 (JSON
    read the same double from an integer's text as Python's ``int`` holds), binary as string; else the
    row-wise reader decides (``repr`` of a float, ``int`` of bytes)."""
    if column.null_count == len(column):
        return pa.nulls(len(column), {"int": pa.int64(), "float": pa.float32()}.get(kind, pa.binary()))
    if column.type == pa.int64():
        if kind == "float":
            return _finite_float32(name, column.cast(pa.float64(), safe=False))  # rounded to nearest, as float()
        return column.cast(pa.string()).cast(pa.binary()) if kind == "string" else column
    if column.type == pa.float64() and kind == "float":
        return _finite_float32(name, column)
    if (column.type == pa.float64() and kind == "int"
            and pc.all(pc.fill_null(pc.less(pc.abs(column), float(2**53)), True)).as_py()):
        try:
            return column.cast(pa.int64())
        except pa.ArrowInvalid:
            pass  # a fraction: not an integer, a bad record
    if column.type == pa.binary() and kind == "string":
        return column
    raise NotColumnar(f"column {name!r}: {column.type} values as {kind}")


def _typed_by_pattern(name: str, column: pa.Array, kind: str) -> pa.Array:
    """``_typed`` value by value: NaN texts are missing, every other value must be a plain number."""
    present = column.is_valid()
    nan = pc.fill_null(pc.match_substring_regex(column, _NAN), False)
    pattern = _INT if kind == "int" else _FLOAT
    fits = pc.fill_null(pc.match_substring_regex(column, pattern), False)
    if not pc.all(pc.or_(pc.invert(present), pc.or_(nan, fits))).as_py():
        raise NotColumnar(f"column {name!r} has values that do not fit {kind}")
    # NaN texts missing; a leading + dropped (Python reads "+7", Arrow does not)
    kept = pc.replace_substring_regex(pc.if_else(nan, pa.scalar(None, pa.string()), column), r"^\+", "")
    try:
        if kind == "int":
            return kept.cast(pa.int64())
        numbers = kept.cast(pa.float64())
    except pa.ArrowInvalid as exc:  # beyond int64
        raise NotColumnar(f"column {name!r}: {exc}") from None
    return _finite_float32(name, numbers)


def _finite_float32(name: str, numbers: pa.Array) -> pa.Array:
    if not pc.all(pc.fill_null(pc.is_finite(numbers), True)).as_py():
        raise NotColumnar(f"column {name!r} has a number that is not finite")
    return numbers.cast(pa.float32(), safe=False)  # a float_list holds float32, rounded to nearest


def _check_classes(values: pa.Array, label: LabelCheck) -> None:
    present = values.drop_null().to_numpy(zero_copy_only=False).astype(np.float64)
    if label.task == "binary":
        fine = np.isin(present, (0.0, 1.0))
    else:
        fine = (np.floor(present) == present) & (present >= 0) & (present < label.classes)
    if not fine.all():
        raise NotColumnar(f"label column {label.column!r} has values that are not classes")


def _feature_entry(name: str, values: pa.Array, kind: str) -> pa.Array:
    """Per row, the map entry ``features.feature[name]`` of a tf.Example as deterministic protobuf bytes
    (null where the value is missing):
    entry = 0x0A len(entry) [0x0A len(name) name 0x12 len(feature) feature], where the feature is
    bytes_list (0x0A), float_list (0x12, packed) or int64_list (0x1A, packed) of one value."""
    key = name.encode("utf-8")
    key_field = b"\x0a" + _varint(len(key)) + key + b"\x12"
    if kind == "float":
        data = np.frombuffer(values.fill_null(0.0).to_numpy(zero_copy_only=False).astype("<f4").tobytes(),
                             np.uint8).reshape(-1, 4)
        feature = b"\x12\x06\x0a\x04"
        entry_size = len(key_field) + 1 + len(feature) + 4
        prefix = b"\x0a" + _varint(entry_size) + key_field + bytes([len(feature) + 4]) + feature
        cells = tfrecords.fixed_width(np.hstack([np.broadcast_to(np.frombuffer(prefix, np.uint8),
                                                                 (len(values), len(prefix))), data]))
    elif kind == "int":
        number = _varints(values.fill_null(0).to_numpy(zero_copy_only=False))
        size = pc.binary_length(number)
        # int64_list (0x0A size number) in a feature (0x1A size+2 ...): sizes below 128, one byte each
        feature = pc.binary_join_element_wise(_bytes_of(pc.add(size, 4)), pa.scalar(b"\x1a", pa.binary()),
                                              _bytes_of(pc.add(size, 2)), pa.scalar(b"\x0a", pa.binary()),
                                              _bytes_of(size), number, _EMPTY)
        cells = _entry(key_field, feature)
    else:
        data = values.fill_null(b"")
        size = pc.binary_length(data).to_numpy(zero_copy_only=False)
        listed_size = 1 + _varint_sizes(size) + size
        feature = pc.binary_join_element_wise(
            _varints(1 + _varint_sizes(listed_size) + listed_size), pa.scalar(b"\x0a", pa.binary()),
            _varints(listed_size), pa.scalar(b"\x0a", pa.binary()), _varints(size), data, _EMPTY)
        cells = _entry(key_field, feature)
    return pc.if_else(values.is_valid(), cells, pa.scalar(None, pa.binary()))


def _list_entry(name: str, values: pa.ListArray, kind: str) -> pa.Array:
    """``_feature_entry`` for a list column (typed_columns; no list is empty): the values of a row packed
    (float_list, int64_list: 0x0A len(packed) packed) or each a bytes_list item (0x0A len(item) item)."""
    items = values.flatten()
    if kind == "float":
        pieces = tfrecords.fixed_width(np.frombuffer(items.to_numpy(zero_copy_only=False).astype("<f4").tobytes(),
                                                     np.uint8).reshape(-1, 4))
    elif kind == "int":
        pieces = _varints(items.to_numpy(zero_copy_only=False))
    else:
        pieces = pc.binary_join_element_wise(pa.scalar(b"\x0a", pa.binary()), _varints(
            pc.binary_length(items).to_numpy(zero_copy_only=False)), items, _EMPTY)
    joined = pc.binary_join(pa.ListArray.from_arrays(values.offsets, pieces), _EMPTY)
    if kind != "string":
        joined = pc.binary_join_element_wise(pa.scalar(b"\x0a", pa.binary()), _varints(
            pc.binary_length(joined).to_numpy(zero_copy_only=False)), joined, _EMPTY)
    tag = {"float": b"\x12", "int": b"\x1a"}.get(kind, b"\x0a")
    feature = pc.binary_join_element_wise(pa.scalar(tag, pa.binary()), _varints(
        pc.binary_length(joined).to_numpy(zero_copy_only=False)), joined, _EMPTY)
    sized = pc.binary_join_element_wise(_varints(pc.binary_length(feature).to_numpy(zero_copy_only=False)),
                                        feature, _EMPTY)
    key = name.encode("utf-8")
    cells = _entry(b"\x0a" + _varint(len(key)) + key + b"\x12", sized)
    return pc.if_else(values.is_valid(), cells, pa.scalar(None, pa.binary()))


def _entry(key_field: bytes, sized_feature: pa.Array) -> pa.Array:
    """0x0A len(entry) key_field sized_feature (the feature's length is already in front of it)."""
    entry_size = len(key_field) + pc.binary_length(sized_feature).to_numpy(zero_copy_only=False)
    return pc.binary_join_element_wise(pa.scalar(b"\x0a", pa.binary()), _varints(entry_size),
                                       pa.scalar(key_field, pa.binary()), sized_feature, _EMPTY)


def _bytes_of(small: pa.Array) -> pa.Array:
    """Numbers below 128 as one byte each (their varint)."""
    return tfrecords.fixed_width(small.to_numpy(zero_copy_only=False).astype(np.uint8).reshape(-1, 1))


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte, number = number & 0x7F, number >> 7
        out.append(byte | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _varint_sizes(numbers: np.ndarray) -> np.ndarray:
    """Bytes each number's varint takes (negative int64: 10, as two's complement)."""
    unsigned = numbers.astype(np.int64).view(np.uint64)
    sizes = np.ones(len(unsigned), np.int64)
    rest = unsigned >> np.uint64(7)
    while rest.any():
        sizes += rest > 0
        rest >>= np.uint64(7)
    return sizes


def _varints(numbers: np.ndarray) -> pa.Array:
    """Protobuf varints of int64 numbers, one binary value each."""
    unsigned = np.asarray(numbers).astype(np.int64).view(np.uint64)
    sizes = _varint_sizes(unsigned.view(np.int64))
    offsets = np.zeros(len(unsigned) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = np.empty(int(offsets[-1]), np.uint8)
    for position in range(int(sizes.max(initial=1))):
        has = sizes > position
        chunk = ((unsigned[has] >> np.uint64(7 * position)) & np.uint64(0x7F)).astype(np.uint8)
        more = (sizes[has] > position + 1).astype(np.uint8) << 7
        data[offsets[:-1][has] + position] = chunk | more
    return pa.Array.from_buffers(pa.large_binary(), len(unsigned), [None, pa.py_buffer(offsets),
                                                                     pa.py_buffer(data)]).cast(pa.binary())
