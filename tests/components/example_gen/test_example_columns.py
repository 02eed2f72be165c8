"""The column-wise TFRecord reader (example_columns) against the row-wise one it stands in for
(records.read_tfrecord): the same column kinds and, record by record, the same tf.Example bytes; what it
cannot read exactly it hands back, and the pipeline reads that file row by row, naming bad records as
before. The comparison itself is test_json_parquet_columns' (``_same``)."""

from __future__ import annotations

import gzip
import math

import pytest

from tests.components.example_gen.test_json_parquet_columns import (
    _column_wise,
    _mixed_rows,
    _same,
    _taxi_rows,
)
from tfxd import tfrecords
from tfxd.components.example_gen import (
    column_sources,
    csv_columns,
    example_columns,
    parsed_examples,
)


def _feature(value):
    import tensorflow as tf

    items = value if isinstance(value, list) else [value]
    if all(isinstance(item, bytes) for item in items):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=items))
    if all(isinstance(item, str) for item in items):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[item.encode() for item in items]))
    if all(isinstance(item, int) for item in items):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=items))
    return tf.train.Feature(float_list=tf.train.FloatList(value=items))


def _example(row: dict) -> bytes:
    """A row as a tf.Example: a list of the kind its items have, None as no feature, a tf.train.Feature
    (one with no values) as it is."""
    import tensorflow as tf

    features = {name: value if isinstance(value, tf.train.Feature) else _feature(value)
                for name, value in row.items() if value is not None}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _write(path, records: list[bytes], gzipped: bool = True) -> str:
    framed = bytes(tfrecords.frames(records))
    path.write_bytes(gzip.compress(framed) if gzipped else framed)
    return str(path)


def _tricky() -> list[dict]:
    import tensorflow as tf

    return [
        {"n": 1, "x": 2.5, "text": "a \"quoted\" text", "numeric_text": "5", "ints": [1, -2, 300], "words": ["a"]},
        {"n": -(2**63), "x": math.nan, "text": "", "numeric_text": "7.25",
         "ints": tf.train.Feature(int64_list=tf.train.Int64List()), "words": ["5", "b" * 200]},
        {},
        {"n": 2**63 - 1, "x": 1e-45, "text": "日本\u00e9\t", "numeric_text": "nan", "ints": [4],
         "kindless": tf.train.Feature()},
        {"n": 0, "x": 3.4028234e38, "text": "x" * 70000, "numeric_text": "-8e0", "floats": [0.1] * 40,
         "only_here": 1},
        {"floats": [1.5], "words": tf.train.Feature(bytes_list=tf.train.BytesList()),
         "a_feature_name_" + "x" * 140: "7"},
    ]


def _tfx_bsl_examples(rows: list[dict]) -> list[bytes]:
    """``rows`` encoded by tfx_bsl's encoder, as TFX's own ExampleGen writes them: a missing value a feature
    with no values, ints as int64, other numbers as float32, texts as bytes."""
    import pyarrow as pa
    from tfx_bsl.coders.example_coder import RecordBatchToExamplesEncoder

    columns = {}
    for name in rows[0]:
        values = [value if isinstance(value, list) or value is None else [value] for value in (row[name] for row in rows)]
        kinds = {type(item) for items in values if items is not None for item in items}
        kind = pa.binary() if str in kinds else pa.int64() if kinds == {int} else pa.float32()
        columns[name] = pa.array([None if items is None else [item.encode() if isinstance(item, str) else item
                                                              for item in items] for items in values], pa.list_(kind))
    return list(RecordBatchToExamplesEncoder().encode(pa.RecordBatch.from_pydict(columns)))


@pytest.mark.parametrize(("writer", "gzipped"), [("tensorflow", True), ("tfx_bsl", False)])
def test_the_taxi_rows_as_tfrecords_read_the_same(tmp_path, monkeypatch, writer, gzipped):
    """Whether a missing value is no feature (tf.train.Example written from a dict) or a feature with no
    values (tfx_bsl's encoder, TFX's ExampleGen), every block after the first is parsed by TensorFlow with
    the features the first block's sample showed, none decoded again."""
    rows = _taxi_rows()
    refused = []
    parse = parsed_examples.Parser.parse

    def counted(self, records):
        batch, unaccounted = parse(self, records)
        refused.extend([len(unaccounted)] if batch is None else [])
        return batch, unaccounted

    monkeypatch.setattr(parsed_examples.Parser, "parse", counted)
    monkeypatch.setattr(example_columns, "BLOCK_BYTES", 64 << 10)
    records = [_example(row) for row in rows] if writer == "tensorflow" else _tfx_bsl_examples(rows)
    path = _write(tmp_path / "d.tfrecord", records, gzipped)
    assert len(_same(path, "tfrecord")) == len(rows) == 10000
    assert refused == []
    assert len(list(column_sources.SOURCES["tfrecord"].pieces((0, path, ""), 1000, 2))) == 1  # a file is a piece


def test_tricky_examples_give_the_same_kinds_and_bytes(tmp_path):
    path = _write(tmp_path / "d.tfrecord.gz", [_example(row) for row in _tricky()])
    _same(path, "tfrecord")
    _same(path, "tfrecord", pinned={"n": "float", "numeric_text": "float", "ints": "string",
                                    "only_here": "float"})
    _same(path, "tfrecord", numeric=frozenset({"numeric_text"}), pinned={"numeric_text": "string"})


def test_a_file_read_in_blocks_reads_the_same(tmp_path, monkeypatch):
    """Records span the blocks the file is read in; a feature missing from a whole block is still missing."""
    monkeypatch.setattr(example_columns, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(example_columns, "PROBE_RECORDS", 16)
    rows = [{"id": index, "late": index if index > 1500 else None, "word": f"w{index % 7}" * (index % 50)}
            for index in range(2000)]
    for gzipped in (True, False):
        path = _write(tmp_path / f"d{gzipped}.tfrecord", [_example(row) for row in rows], gzipped)
        batches = list(column_sources.SOURCES["tfrecord"].batches((0, path, "", 0, 0, None)))
        assert len(batches) > 10 and "late" not in batches[0].schema.names
        assert len(_same(path, "tfrecord")) == 2000


def _damaged(records: list[bytes]) -> bytes:
    framed = bytearray(tfrecords.frames(records))
    framed[-6] ^= 1  # the last record's bytes no longer match its CRC
    return bytes(framed)


@pytest.mark.parametrize("content", [
    pytest.param(lambda: [_example({"a": 1}), b"\xffnot an example"], id="not a tf.Example"),
    pytest.param(lambda: [_example({"a": 1}), _example({"a": 1.5})], id="a feature of two kinds"),
    pytest.param(lambda: [_example({"a": b"\xe9"}), _example({"a": "x"})], id="bytes that are not UTF-8"),
    pytest.param(lambda: [_example({"a": [1.0, math.nan]})], id="NaN among several values"),
    pytest.param(lambda: [], id="no records"),
    pytest.param(lambda: gzip.compress(_damaged([_example({"a": 1})] * 3)), id="a damaged record"),
    pytest.param(lambda: gzip.compress(bytes(tfrecords.frames([_example({"a": 1})] * 3)))[:-30], id="cut off"),
    pytest.param(lambda: bytes(tfrecords.frames([_example({"a": 1})] * 3))[:-2], id="cut off, not gzipped"),
])
def test_what_it_cannot_read_exactly_is_handed_back(tmp_path, content):
    made = content()
    path = tmp_path / "d.tfrecord"
    if isinstance(made, bytes):
        path.write_bytes(made)
    else:
        _write(path, made)
    with pytest.raises(csv_columns.NotColumnar):
        _column_wise(str(path), "tfrecord")


def test_the_pipeline_writes_what_the_row_wise_pipeline_writes(run_example_gen, tmp_path, monkeypatch):
    """Several files, one of them read row by row (a feature of two kinds in it), the others column-wise."""
    from tfxd.components.example_gen import executor

    rows = _mixed_rows(3000)
    for row in rows:
        row["amount"] = float(row["amount"])  # a feature of one kind in every file but the last
    (tmp_path / "data").mkdir()
    for index in range(3):
        _write(tmp_path / "data" / f"part-{index}.tfrecord.gz", [_example(row) for row in rows[index::3]])
    _write(tmp_path / "data" / "part-3.tfrecord.gz", [_example({"id": 3000, "amount": 1}), _example({"amount": 1.5})])
    data = {"format": "tfrecord", "path": str(tmp_path / "data" / "*.gz"), "columns": {"fare": "float"}}
    handed_back, read = [], column_sources.TfRecords.rows

    def rows(self, piece):
        handed_back.append(piece[1])
        return read(self, piece)

    monkeypatch.setattr(column_sources.TfRecords, "rows", rows)
    columnar, columnar_artifact = run_example_gen(data)
    assert [path.rsplit("/", 1)[1] for path in handed_back] == ["part-3.tfrecord.gz"] * 2  # kinds, then examples
    monkeypatch.setattr(executor, "_columnar", lambda _: False)
    by_row, by_row_artifact = run_example_gen(data)
    assert columnar == by_row
    assert sum(map(len, columnar.values())) == 3002
    assert (columnar_artifact.get_string_custom_property("tfxd_split_counts")
            == by_row_artifact.get_string_custom_property("tfxd_split_counts"))


@pytest.mark.reliability("bad data")
def test_a_damaged_record_is_named_by_its_file_and_index(run_example_gen, tmp_path):
    (tmp_path / "d.tfrecord.gz").write_bytes(gzip.compress(_damaged([_example({"a": index}) for index in range(5)])))
    with pytest.raises(Exception, match=r"d\.tfrecord\.gz#4: corrupted record"):
        run_example_gen({"format": "tfrecord", "path": "d.tfrecord.gz"}, folder=tmp_path)
