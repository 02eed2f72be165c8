"""The column-wise JSON lines and Parquet readers against the row-wise ones they stand in for: the same
column kinds and, record by record, the same tf.Example bytes (so the same splits), piece after piece;
what they cannot read exactly they hand back, and the pipeline reads it row by row, naming bad records as
before."""

from __future__ import annotations

import csv
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.components.example_gen.conftest import EXTERNAL
from tfxd.components.example_gen import (
    column_sources,
    csv_chunks,
    csv_columns,
    input_files,
    records,
    typed_columns,
)

TRICKY_JSON = [
    {"n": 1, "mixed": 2, "text": "a \"quoted\" text", "numeric_text": "5", "flag": True, "gone": None},
    {"n": -9223372036854775808, "mixed": 2.5, "text": "", "numeric_text": "7.25", "flag": False, "only_here": 1},
    {},
    {"n": 9223372036854775807, "mixed": 1e-45, "text": "日本\u00e9\t", "numeric_text": "nan", "flag": None},
    {"n": 0, "mixed": 3.4028234e38, "text": "x" * 70000, "numeric_text": "-8e0", "nan": float("nan")},
    {"a_column_name_" + "x" * 140: 1, "mixed": 7, "date": "2020-01-01T10:00:00Z"},  # a timestamp to pyarrow
    {"ints": [1, None, -2, 300], "floats": [1, 2.5], "words": ["a", "5", "b" * 200], "numbers": ["1", "2.5"]},
    {"ints": [], "floats": [None], "words": ["x"], "numbers": ["7"]},
    {"ints": [2**62], "floats": [0.1] * 40, "words": None, "numbers": None},
]
TRICKY_KINDS = {"n": "int", "mixed": "float", "text": "string", "numeric_text": "float", "flag": "int",
                "gone": None, "only_here": "int", "nan": None, "date": "string", "ints": "int", "floats": "float",
                "words": "string", "numbers": "float", "a_column_name_" + "x" * 140: "int"}


def _row_wise(path: str, data_format: str, pinned: dict | None = None, numeric: frozenset[str] = frozenset()):
    """(kinds, [example bytes or Bad]) as the row-wise pipeline reads ``path``."""
    rows = list(records.READERS[data_format](path, input_files.open_file))
    kinds: dict = {}
    for row in rows:
        if isinstance(row, records.Row):
            records.TypeInferenceState.add(kinds, row.values, numeric)
    types = records.final_types(kinds, pinned or {})
    out: list = []
    for row in rows:
        if isinstance(row, records.Bad):
            out.append(row)
            continue
        features, problem = records.encode(row.values, types)
        out.append(records.Bad(row.location, *problem) if problem else records.example_bytes(features, types))
    return kinds, out


def _column_wise(path: str, data_format: str, pinned: dict | None = None, numeric: frozenset[str] = frozenset(),
                 chunk_bytes: int = 1 << 30):
    """(kinds, [example bytes], pieces) read column-wise piece by piece; NotColumnar where it cannot."""
    source = column_sources.SOURCES[data_format]
    pieces = list(source.pieces((0, path, ""), chunk_bytes))
    kinds: dict = {}
    for piece in pieces:
        for batch in source.batches(piece):
            kinds = records.TypeInferenceState.merge([kinds, csv_columns.kinds(batch, numeric)])
    types = records.final_types(kinds, pinned or {})
    examples = [example for piece in pieces for batch in source.batches(piece)
                for example in csv_columns.example_bytes(batch, types, None).to_pylist()]
    return kinds, examples, len(pieces)


def _same(path: str, data_format: str, **options) -> list[bytes]:
    """Assert both readers agree on ``path``; the examples."""
    chunk_bytes = options.pop("chunk_bytes", 1 << 30)
    row_kinds, by_row = _row_wise(path, data_format, **options)
    column_kinds, columnar, _ = _column_wise(path, data_format, chunk_bytes=chunk_bytes, **options)
    assert column_kinds == row_kinds
    assert columnar == by_row
    return columnar


def _taxi_rows() -> list[dict]:
    with open(EXTERNAL / "csv" / "data.csv", newline="") as source:
        rows = list(csv.DictReader(source))

    def number(text: str):
        try:
            return int(text)
        except ValueError:
            return float(text) if text else None

    return [{key: (number(value) if key not in ("company", "payment_type") else value or None)
             for key, value in row.items()} for row in rows]


def test_the_taxi_rows_as_json_lines_read_the_same_in_chunks(tmp_path):
    typed, texts = tmp_path / "typed.jsonl", tmp_path / "texts.jsonl"
    typed.write_text("".join(json.dumps(row) + "\n" for row in _taxi_rows()[:4000]))
    with open(EXTERNAL / "csv" / "data.csv", newline="") as source:  # every value a JSON string, as CSV's
        texts.write_text("".join(json.dumps({k: v or None for k, v in row.items()}) + "\n"
                                 for row in list(csv.DictReader(source))[:4000]))
    for path in (typed, texts):
        assert len(_same(str(path), "jsonl", chunk_bytes=300_000)) == 4000
    assert _column_wise(str(typed), "jsonl", chunk_bytes=300_000)[2] > 3


def test_the_taxi_rows_as_parquet_read_the_same_by_row_groups(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(_taxi_rows()), path, row_group_size=1000)
    assert len(_same(str(path), "parquet", chunk_bytes=50_000)) == 10000
    assert _column_wise(str(path), "parquet", chunk_bytes=50_000)[2] > 3


def test_parquet_pieces_for_workers_are_runs_of_about_one_size(tmp_path, monkeypatch):
    """As many runs of row groups for each worker, split by their bytes (csv_chunks.piece_count)."""
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(_taxi_rows()), path, row_group_size=1000)
    groups = pq.ParquetFile(path).metadata.num_row_groups
    source = column_sources.SOURCES["parquet"]
    assert [piece[4:] for piece in source.pieces((0, str(path), ""), 1 << 30, 2)] == [(0, groups)]  # small
    monkeypatch.setattr(csv_chunks, "MIN_PIECE_BYTES", 1000)
    assert [piece[4:] for piece in source.pieces((0, str(path), ""), 1 << 30, 2)] == [(0, 5), (5, 10)]
    assert [piece[4:] for piece in source.pieces((0, str(path), ""), 1 << 30, 3)] == [(0, 4), (4, 7), (7, 10)]
    runs = [piece[4:] for piece in source.pieces((0, str(path), ""), 1, 2)]  # a piece per byte: each group at most
    assert runs[0][0] == 0 and runs[-1][1] == groups and groups // 2 < len(runs) <= groups
    assert all(start < end == next_start for (start, end), (next_start, _) in zip(runs, runs[1:] + [(groups, 0)], strict=True))


def test_tricky_json_lines_give_the_same_kinds_and_bytes(tmp_path):
    path = tmp_path / "d.jsonl"
    lines = [json.dumps(row) for row in TRICKY_JSON]
    path.write_bytes(("\r\n".join(lines[:3]) + "\n\n   \n" + "\n".join(lines[3:]) + "\n").encode())
    assert _row_wise(str(path), "jsonl")[0] == TRICKY_KINDS
    _same(str(path), "jsonl")
    _same(str(path), "jsonl", pinned={"n": "float", "mixed": "float", "flag": "string", "only_here": "float",
                                      "ints": "string", "numbers": "float"})
    _same(str(path), "jsonl", numeric=frozenset({"numeric_text"}), pinned={"numeric_text": "string"})


def test_random_doubles_round_to_the_same_float32(tmp_path):
    import random

    generator = random.Random(7)
    numbers = [generator.uniform(-1, 1) * 10.0 ** generator.randint(-50, 50) for _ in range(3000)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"x": number, "y": f"{number:.9g}"}) + "\n" for number in numbers))
    _same(str(path), "jsonl")


def test_typed_parquet_columns_give_the_same_kinds_and_bytes(tmp_path):
    path = tmp_path / "d.parquet"
    table = pa.table({
        "i8": pa.array([1, None, -3, 4], pa.int8()), "u32": pa.array([1, 2, 4_000_000_000, None], pa.uint32()),
        "f32": pa.array([1.5, math.nan, None, 1e-40], pa.float32()), "f64": [0.1, None, -2.0, 1e300],
        "flag": [True, False, None, True], "text": ["1", None, "x", "2.5"], "ints_as_text": ["1", "+7", None, "-3"],
        "raw": pa.array([b"\xff", b"", None, b"a"]), "words": pa.array(["a", "b", "a", None]).dictionary_encode(),
        "nothing": pa.nulls(4), "ints": [[1, None], None, [], [2, 3, 4]], "texts": [["a", "1"], ["b"], None, [None]],
        "floats": pa.array([[1.5], [2.25, -3.0], None, []], pa.list_(pa.float32()))})
    pq.write_table(table, path, row_group_size=3)
    assert _same(str(path), "parquet", chunk_bytes=1) == _same(str(path), "parquet")
    _same(str(path), "parquet", pinned={"i8": "string", "u32": "float", "flag": "float", "f64": "float",
                                        "ints": "float"})


@pytest.mark.parametrize("line", [
    '{"a": 1} {"a": 2}',  # two objects on a line: pyarrow reads both, json.loads refuses the line
    '{"a": -0}\n{"a": 0.5}',  # 0 to json.loads, -0.0 to pyarrow in a float64 column
    '{"a": 9223372036854775808}',  # beyond int64: a bad record row-wise, a double to pyarrow
    '{"a": 1e19}\n{"a": 2}',  # a float64 column of whole numbers beyond int64: integers or floats
    '\ufeff{"a": 1}',  # a byte order mark
    '{"a": -NaN}',  # pyarrow reads NaN, json.loads refuses the line
    '{"a": 1}\x00',  # pyarrow stops at a NUL, json.loads refuses the line
    '{"a": 1',  # invalid JSON
    '{"a": 1, "a": 2}',  # a key twice: json.loads keeps the last
    '{"a": [1, [2]]}',  # a list of lists: a bad record row-wise
    '{"a": [NaN, 2]}',  # NaN in a list: a bad record row-wise
    '{"a": [-0, 0.5]}',  # -0 in a float64 list
    '{"a": {"b": 1}}',  # an object: a bad record row-wise
    '{"a": "\\ud800"}',  # a lone surrogate
    '[1]',  # not an object
])
def test_json_it_cannot_read_exactly_is_handed_back(tmp_path, line):
    path = tmp_path / "d.jsonl"
    path.write_text('{"a": 1}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(csv_columns.NotColumnar):
        _column_wise(str(path), "jsonl")


def test_json_that_is_not_utf8_is_handed_back(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'{"a": "\xe9"}\n')
    with pytest.raises(csv_columns.NotColumnar):
        _column_wise(str(path), "jsonl")


@pytest.mark.parametrize("column, pinned", [
    (pa.array([1.5, 2.0]), {"x": "string"}),  # Python's repr of a float
    (pa.array([1.5, 2.0]), {"x": "int"}),  # 1.5 is not an integer: a bad record
    (pa.array([2.0**53 + 2, 1.0]), {"x": "int"}),  # a whole double beyond 2**53
    (pa.array([1.0, math.inf]), {}),  # not finite: a bad record
    (pa.array([2**64 - 1, 1], pa.uint64()), {}),  # beyond int64: a bad record
    (pa.array([b"5"]), {"x": "int"}),  # int() of bytes
    (pa.array([[[1], [2]], None]), {}),  # lists of lists
    (pa.array([[1.0, math.nan], None]), {}),  # NaN in a list: not finite
    (pa.array([[{"a": 1}]]), {}),  # objects in a list
    (pa.array([1, 2], pa.timestamp("s")), {}),  # dates and times: isoformat() row-wise
    (pa.array([1, 2], pa.decimal128(5, 2)), {}),
])
def test_parquet_it_cannot_read_exactly_is_handed_back(tmp_path, column, pinned):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": column}), path)
    with pytest.raises(csv_columns.NotColumnar):
        _column_wise(str(path), "parquet", pinned=pinned)


def test_the_comparison_catches_pyarrows_own_reading_of_integers(tmp_path):
    """Without json_columns' check, pyarrow's -0.0 (0, an integer, to json.loads) in a float column would
    be written as -0.0: the comparison sees the bytes differ."""
    import pyarrow.json as pjson

    path = tmp_path / "d.jsonl"
    path.write_text('{"a": -0}\n{"a": 3.5}\n')
    row_kinds, by_row = _row_wise(str(path), "jsonl")
    batch = typed_columns.plain(pjson.read_json(str(path)))
    naive_kinds = csv_columns.kinds(batch, frozenset())
    naive = csv_columns.example_bytes(batch, records.final_types(naive_kinds, {}), None).to_pylist()
    assert row_kinds == naive_kinds == {"a": "float"}
    assert naive[1] == by_row[1] and naive[0] != by_row[0]
    with pytest.raises(csv_columns.NotColumnar):
        _column_wise(str(path), "jsonl")


def _mixed_rows(count: int) -> list[dict]:
    """Rows with ints and floats in one column, missing values, texts, lists, a label, and whole floats
    read as int (data.columns): the last one beyond 2**53, so its piece is read row by row."""
    rows = []
    for index in range(count):
        row: dict = {"id": index, "amount": index / 4 if index % 3 else index, "word": f"w{index % 7}",
                     "maybe": None if index % 5 == 0 else index * 1.5, "tips": index % 2, "fare": 1.0,
                     "tags": [index, index + 1] if index % 4 else None, "whole": float(index)}
        if index % 11 == 0:
            row.pop("word")
        rows.append(row)
    rows[-1]["whole"] = 2.0**53 + 2
    return rows


@pytest.mark.parametrize("data_format", ["jsonl", "parquet"])
def test_the_pipeline_writes_what_the_row_wise_pipeline_writes(run_example_gen, tmp_path, monkeypatch, data_format):
    from tfxd.components.example_gen import csv_chunks, executor

    rows = _mixed_rows(3000)
    path = tmp_path / f"d.{data_format}"
    if data_format == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=500)
    monkeypatch.setattr(csv_chunks, "CHUNK_BYTES", 20_000)  # several pieces
    data = {"format": data_format, "path": str(path), "columns": {"fare": "float", "whole": "int"}}
    decided, decide = [], executor._columnar
    monkeypatch.setattr(executor, "_columnar", lambda properties: decided.append(decide(properties)) or decided[-1])
    columnar, columnar_artifact = run_example_gen(data)
    monkeypatch.setattr(executor, "_columnar", lambda _: False)
    by_row, by_row_artifact = run_example_gen(data)
    assert decided == [True]
    assert columnar == by_row
    assert sum(map(len, columnar.values())) == 3000
    assert (columnar_artifact.get_string_custom_property("tfxd_split_counts")
            == by_row_artifact.get_string_custom_property("tfxd_split_counts"))


@pytest.mark.reliability("bad data")
def test_bad_json_lines_are_named_by_their_line_in_a_later_piece(run_example_gen, tmp_path, monkeypatch):
    from tfxd.components.example_gen import csv_chunks

    lines = [json.dumps(row) for row in _mixed_rows(600)]
    lines[456] = '{"id": 456, "amount": '
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(csv_chunks, "CHUNK_BYTES", 10_000)
    with pytest.raises(Exception, match=r"d\.jsonl:457: invalid JSON"):
        run_example_gen({"format": "jsonl", "path": "d.jsonl"}, folder=tmp_path)
    _, examples = run_example_gen({"format": "jsonl", "path": "d.jsonl", "bad_records": "skip"}, folder=tmp_path)
    assert json.loads(examples.get_string_custom_property("tfxd_bad_records")) == {"invalid JSON": 1}


@pytest.mark.reliability("bad data")
def test_bad_parquet_rows_are_named_by_their_row_in_a_later_row_group(run_example_gen, tmp_path, monkeypatch):
    from tfxd.components.example_gen import csv_chunks

    rows = _mixed_rows(600)
    for row in rows:
        row["code"] = str(row["id"])
    rows[345]["code"] = "three"
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet", row_group_size=100)
    monkeypatch.setattr(csv_chunks, "CHUNK_BYTES", 1)
    with pytest.raises(Exception, match=r"d\.parquet#345: value does not fit its column: column 'code': 'three'"):
        run_example_gen({"format": "parquet", "path": "d.parquet", "columns": {"code": "int"}}, folder=tmp_path)
