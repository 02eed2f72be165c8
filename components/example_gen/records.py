"""Rows read from files: the record model, file readers per format, type inference and tf.Example encoding.

A row is ``{column: value}`` where a value is None (missing), a scalar or a
list of scalars. Readers never guess types; ``TypeInference`` looks at every
row of every split, so all splits share one schema. Missing values stay
missing: an absent feature in the tf.Example, never 0 or "". A NaN number (or
"nan" text in a number column) is a missing value; infinities are bad records.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tfxd.components.example_gen.input_files import Opener, starts_gzipped
from tfxd.reader_config import LabelCheck


class BadRecordError(ValueError):
    """A record that cannot be read, under ``bad_records: fail``: names the place and the reason."""

    def __init__(self, location: str, reason: str, detail: str) -> None:
        super().__init__(f"{location}: {reason}: {detail} (set data.bad_records: skip to skip such records)")


class InputError(ValueError):
    """The input as a whole is unusable (empty, header only, no files): names the path."""


@dataclass(frozen=True)
class Bad:
    location: str  # "path:line" or "path#record"
    reason: str  # a short category, counted under bad_records: skip
    detail: str

    def error(self) -> BadRecordError:
        return BadRecordError(self.location, self.reason, self.detail)


@dataclass(frozen=True)
class Row:
    location: str
    values: dict[str, Any]


# ------------------------------------------------------------------ readers


# One CSV field may be as long as this (Python's default, 128 KiB, is too small for long texts).
CSV_FIELD_LIMIT = 2**31 - 1


def read_csv(path: str, opener: Opener, line_offset: int = 0) -> Iterator[Row | Bad]:
    """The rows of a CSV file; ``line_offset`` is added to the line numbers in locations (a chunk of a
    file, csv_chunks)."""
    csv.field_size_limit(CSV_FIELD_LIMIT)
    with opener(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
        reader = csv.reader(text)
        header = read_header(path, reader)
        rows = 0
        for line, fields in _csv_lines(reader):
            location = f"{path}:{line + line_offset}"
            if not fields:
                continue
            rows += 1
            if isinstance(fields, csv.Error):
                yield Bad(location, "unreadable CSV", str(fields))
            elif any(_undecodable(field) for field in fields):
                yield Bad(location, "not UTF-8", "the record has bytes that are not UTF-8 text")
            elif len(fields) != len(header):
                yield Bad(location, "ragged row", f"{len(fields)} fields where the header has {len(header)}")
            else:
                yield Row(location, {name: (value if value != "" else None) for name, value in zip(
                    header, fields, strict=True)})
        if rows == 0:
            raise InputError(f"{path} has a header but no rows")


def read_header(path: str, reader: Any) -> list[str]:
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise InputError(f"{path}:1: the header is not readable CSV: {exc}") from None
    if not header:
        raise InputError(f"{path} is empty: a CSV file needs a header line and rows")
    header = [name.strip() for name in header]
    _check_header(path, header)
    return header


def _csv_lines(reader: Any) -> Iterator[tuple[int, list[str] | csv.Error]]:
    """(the line a record starts on, its fields or the csv.Error it raised); reading goes on after errors."""
    while True:
        start = reader.line_num + 1
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, exc
        else:
            yield start, fields


def _check_header(path: str, header: list[str]) -> None:
    if any(_undecodable(name) for name in header):
        raise InputError(f"{path}:1: the header is not UTF-8 text")
    seen = set()
    for name in header:
        if not name:
            raise InputError(f"{path}:1: the header has an empty column name")
        if name in seen:
            raise InputError(f"{path}:1: column {name!r} appears twice in the header")
        seen.add(name)


def _undecodable(text: str) -> bool:
    return any("\udc80" <= char <= "\udcff" for char in text)


def read_jsonl(path: str, opener: Opener, line_offset: int = 0) -> Iterator[Row | Bad]:
    """The rows of a JSON lines file; ``line_offset`` as in ``read_csv``."""
    rows = 0
    with opener(path) as raw:
        for number, line in enumerate(raw, start=1 + line_offset):
            location = f"{path}:{number}"
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                yield Bad(location, "not UTF-8", "the line has bytes that are not UTF-8 text")
                continue
            if not text.strip():
                continue
            rows += 1
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                yield Bad(location, "invalid JSON", exc.msg)
                continue
            if not isinstance(record, dict):
                yield Bad(location, "not a JSON object", f"got {type(record).__name__}")
                continue
            values, problem = plain_values(record)
            yield Bad(location, "nested value", problem) if problem else Row(location, values)
    if rows == 0:
        raise InputError(f"{path} is empty: JSON Lines needs one object per line")


def read_parquet(path: str, opener: Opener, groups: tuple[int, int] | None = None) -> Iterator[Row | Bad]:
    """The rows of a Parquet file, or of its row groups [first, end) (a piece of it, parquet_columns),
    numbered as in the whole file."""
    import pyarrow.parquet as pq

    with opener(path) as raw:
        parquet = pq.ParquetFile(raw)
        first, end = groups or (0, parquet.num_row_groups)
        rows = sum(parquet.metadata.row_group(group).num_rows for group in range(first))
        for batch in parquet.iter_batches(batch_size=4096, row_groups=list(range(first, end))):
            for record in batch.to_pylist():
                location = f"{path}#{rows}"
                rows += 1
                values, problem = plain_values(record)
                yield Bad(location, "nested value", problem) if problem else Row(location, values)
    if rows == 0:
        raise InputError(f"{path} has no rows")


def read_tfrecord(path: str, opener: Opener) -> Iterator[Row | Bad]:  # noqa: ARG001 - one reader signature
    """tf.Example records, gzipped or not (told apart by the gzip magic bytes)."""
    import tensorflow as tf

    compression = "GZIP" if starts_gzipped(path) else ""  # the stored bytes: ``opener`` decompresses .gz files
    dataset = tf.data.TFRecordDataset(path, compression_type=compression).as_numpy_iterator()
    index = 0
    while True:
        location = f"{path}#{index}"
        try:
            serialized = next(dataset)
        except StopIteration:
            break
        except tf.errors.DataLossError as exc:
            yield Bad(location, "corrupted record", exc.message.split("}} ")[-1].split(" [Op:")[0])
            break
        index += 1
        try:
            example = tf.train.Example.FromString(serialized)
        except Exception:  # noqa: BLE001 - protobuf raises DecodeError or RuntimeWarning subclasses
            yield Bad(location, "not a tf.Example", "the record does not parse as tf.train.Example")
            continue
        yield Row(location, _example_values(example))
    if index == 0:
        raise InputError(f"{path} has no records")


READERS: dict[str, Callable[[str, Opener], Iterator[Row | Bad]]] = {
    "csv": read_csv,
    "jsonl": read_jsonl,
    "parquet": read_parquet,
    "tfrecord": read_tfrecord,
}


def plain_values(record: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    values: dict[str, Any] = {}
    for name, value in record.items():
        if isinstance(value, dict):
            return values, f"column {name!r} holds an object; tfxd reads scalars and lists of scalars"
        if isinstance(value, list):
            if any(isinstance(item, (dict, list)) for item in value):
                return values, f"column {name!r} holds nested lists or objects"
            items = [_scalar(item) for item in value if item is not None]
            values[name] = items or None
        else:
            values[name] = _scalar(value)
    return values, None


def _scalar(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str, bytes)) or value is None:
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return float(value) if hasattr(value, "__float__") else str(value)


def _example_values(example: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        items = list(getattr(feature, kind).value) if kind else []
        if kind == "bytes_list":
            items = [_text(item) for item in items]
        values[name] = None if not items else items[0] if len(items) == 1 else items
    return values


def _text(value: bytes) -> str | bytes:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


# ----------------------------------------------------------- type inference


def kind_of(value: Any) -> str | None:
    """The narrowest kind that holds ``value`` (strings from CSV are read as numbers where they parse);
    None for a missing value, NaN included."""
    if value is None:
        return None
    if isinstance(value, list):
        kinds = {kind_of(item) for item in value} - {None}
        return widest(kinds)
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return None if math.isnan(value) else "float"
    if isinstance(value, bytes):
        return "string"
    text = value.strip()
    try:
        int(text)
        return "int"
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return "string"
    return None if math.isnan(number) else "float"


def widest(kinds: set[str | None]) -> str | None:
    kinds = {kind for kind in kinds if kind}
    if "string" in kinds:
        return "string"
    if "float" in kinds:
        return "float"
    return "int" if kinds else None


class TypeInferenceState:
    """Column -> kind seen so far; merged across rows, files and workers."""

    @staticmethod
    def add(state: dict[str, str | None], values: dict[str, Any],
            numeric: frozenset[str] = frozenset()) -> dict[str, str | None]:
        """``numeric``: columns the spec reads as numbers; words in them do not make them string columns
        (unless there is nothing else): they become bad records when encoded."""
        for name, value in values.items():
            kind = kind_of(value)
            state[name] = widest({state.get(name), None if kind == "string" and name in numeric else kind})
        return state

    @staticmethod
    def merge(states: list[dict[str, str | None]]) -> dict[str, str | None]:
        merged: dict[str, str | None] = {}
        for state in states:
            for name, kind in state.items():
                merged[name] = widest({merged.get(name), kind})
        return merged


def final_types(seen: dict[str, str | None], pinned: dict[str, str]) -> dict[str, str]:
    """Kinds per column: pinned ones win; a column never seen with a value is a string."""
    types = {name: kind or "string" for name, kind in seen.items()}
    types.update(pinned)
    return dict(sorted(types.items()))


# ---------------------------------------------------------------- encoding


UNFIT = "value does not fit its column"
NOT_FINITE = "not finite"
UNEXPECTED_LABEL = "unexpected label"
INT64 = (-(2**63), 2**63 - 1)


def encode(values: dict[str, Any], types: dict[str, str]) -> tuple[dict[str, list[Any]], tuple[str, str] | None]:
    """Values converted to their column kinds: {column: [values]}; or (reason, detail) of a value that
    does not fit. A whole value that is NaN in a number column is missing; NaN inside a list and
    infinities are not finite: bad records."""
    features: dict[str, list[Any]] = {}
    for name, kind in types.items():
        value = values.get(name)
        if _missing(value, kind):
            continue
        items = value if isinstance(value, list) else [value]
        converted = []
        for item in items:
            result = _convert(item, kind)
            if isinstance(result, _Unfit):
                return {}, (result.reason, f"column {name!r}: {_shown(item)} {result.why}")
            converted.append(result)
        features[name] = converted
    return features, None


@dataclass(frozen=True)
class _Unfit:
    why: str
    reason: str = UNFIT


def _missing(value: Any, kind: str) -> bool:
    """None, a NaN number, or a "nan" text in a number column (in a string column, text is text)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    if kind == "string" or not isinstance(value, str):
        return False
    return value.strip().lstrip("+-").lower() == "nan"  # the texts float() reads as NaN


def _shown(item: Any) -> str:
    """The value as the error shows it: long texts cut short."""
    text = repr(item)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _convert(item: Any, kind: str) -> Any:
    if kind == "string":
        if isinstance(item, bytes):
            return item
        return (repr(item) if isinstance(item, float) else str(item)).encode("utf-8")
    return _integer(item) if kind == "int" else _float(item)


def _float(item: Any) -> float | _Unfit:
    try:
        number = float(item.strip() if isinstance(item, str) else item)
    except (ValueError, TypeError):
        return _Unfit("is not a number")
    return number if math.isfinite(number) else _not_finite(number)


def _integer(item: Any) -> int | _Unfit:
    if isinstance(item, float) and not item.is_integer():
        return _not_finite(item) if not math.isfinite(item) else _Unfit("is not an integer")
    try:
        number = int(item.strip() if isinstance(item, str) else item)
    except (ValueError, TypeError):
        number_or_unfit = _float(item)
        if isinstance(number_or_unfit, _Unfit) and number_or_unfit.reason == NOT_FINITE:
            return number_or_unfit
        return _Unfit("is not an integer")
    return number if INT64[0] <= number <= INT64[1] else _Unfit("is outside the 64-bit integer range")


def _not_finite(number: float) -> _Unfit:
    if math.isnan(number):
        return _Unfit("is NaN inside a list (only a whole value can be missing)", NOT_FINITE)
    return _Unfit("is not a finite number", NOT_FINITE)


def label_problem(features: dict[str, list[Any]], types: dict[str, str], label: LabelCheck) -> str | None:
    """Why a record's label is not a class the spec expects (binary: 0 or 1; multiclass: 0 to
    num_classes - 1), or None. Only number labels are checked here: string labels of a multiclass task
    are classes by vocabulary (checked in Transform)."""
    column = label.column
    if types.get(column) not in ("int", "float"):
        return None
    for value in features.get(column, []):
        why = _class_problem(value, label)
        if why:
            return f"label column {column!r}: {value!r} {why}"
    return None


def _class_problem(value: float, label: LabelCheck) -> str | None:
    if label.task == "binary":
        if value in (0, 1):
            return None
        return (f"is not a class of a binary label (0 or 1); compute the label with label.expr, e.g. "
                f"'{label.column} > 0', or use task multiclass")
    classes = label.classes
    if float(value).is_integer() and 0 <= value < classes:
        return None
    return (f"is not a class id of a multiclass label with num_classes {classes} (0 to {classes - 1}); "
            "fix the data or raise label.num_classes")


def example_bytes(features: dict[str, list[Any]], types: dict[str, str]) -> bytes:
    """Serialize as a tf.train.Example, deterministically (the split hash depends on it)."""
    from tensorflow.core.example import example_pb2, feature_pb2

    example = example_pb2.Example()
    for name, items in features.items():
        feature: feature_pb2.Feature = example.features.feature[name]
        kind = types[name]
        if kind == "int":
            feature.int64_list.value.extend(items)
        elif kind == "float":
            feature.float_list.value.extend(items)
        else:
            feature.bytes_list.value.extend(items)
    return example.SerializeToString(deterministic=True)
