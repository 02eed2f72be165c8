"""tfxd's ExampleGen on real data: formats agree, splits are deterministic, bad input is explained."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
import tensorflow as tf

from tests.components.example_gen.conftest import EXTERNAL, PARQUET_TYPES
from tfxd.direct_runner import direct_args


def _write_jsonl_copy(folder):
    with open(EXTERNAL / "csv" / "data.csv", newline="") as source, open(folder / "data.jsonl", "w") as target:
        for row in csv.DictReader(source):
            target.write(json.dumps({k: (v if v != "" else None) for k, v in row.items()}) + "\n")
    return folder / "data.jsonl"


def _write_parquet_copy(folder):
    """The shipped parquet file, with pandas' "nan" strings (written where a string was missing) made
    missing again, as they are in the other formats."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(EXTERNAL / "parquet" / "data.parquet")
    assert pc.sum(pc.equal(table["company"], "nan")).as_py() > 0
    for index, column in enumerate(table.schema):
        if pa.types.is_string(column.type):
            values = table.column(index)
            table = table.set_column(index, column.name, pc.if_else(pc.equal(values, "nan"), None, values))
    pq.write_table(table, folder / "data.parquet")
    return folder / "data.parquet"


def test_formats_give_the_same_examples_and_splits(run_example_gen, tmp_path):
    sources = {
        "csv": str(EXTERNAL / "csv" / "data.csv"),
        "parquet": str(_write_parquet_copy(tmp_path)),
        "jsonl": str(_write_jsonl_copy(tmp_path)),
    }
    results = {}
    for data_format, path in sources.items():
        splits, examples = run_example_gen({"format": data_format, "path": path, "columns": PARQUET_TYPES})
        results[data_format] = splits
        assert json.loads(examples.get_string_custom_property("tfxd_split_counts")) == {
            name: len(records) for name, records in splits.items()}
    csv_splits = results["csv"]
    assert sum(len(v) for v in csv_splits.values()) == 10000
    assert 0.75 < len(csv_splits["train"]) / 10000 < 0.85
    # tfrecord: the shipped tfrecord copy is another sample of trips (15,000 rows), so the same rows
    # are written here as uncompressed tf.Examples, shuffled across splits, and must land where they were.
    with tf.io.TFRecordWriter(str(tmp_path / "data.tfrecord")) as writer:
        for record in csv_splits["eval"] + csv_splits["train"]:
            writer.write(record)
    results["tfrecord"], _ = run_example_gen({"format": "tfrecord", "path": str(tmp_path / "data.tfrecord")})
    for data_format, splits in results.items():
        assert splits == csv_splits, data_format


def test_compressed_files_give_the_examples_of_the_plain_ones(run_example_gen, tmp_path):
    import bz2
    import gzip
    import lzma

    import zstandard

    plain = (EXTERNAL / "csv" / "data.csv").read_bytes()
    (tmp_path / "data.csv.gz").write_bytes(gzip.compress(plain))
    (tmp_path / "data.csv.bz2").write_bytes(bz2.compress(plain))
    (tmp_path / "data.csv.zst").write_bytes(zstandard.ZstdCompressor().compress(plain))
    (tmp_path / "data.csv.xz").write_bytes(lzma.compress(plain))
    (tmp_path / "data.jsonl.gz").write_bytes(gzip.compress(_write_jsonl_copy(tmp_path).read_bytes()))
    expected, _ = run_example_gen({"format": "csv", "path": str(EXTERNAL / "csv" / "data.csv"), "columns": PARQUET_TYPES})
    for name in ("data.csv.gz", "data.csv.bz2", "data.csv.zst", "data.csv.xz", "data.jsonl.gz"):
        data_format = name.split(".")[1]
        splits, _ = run_example_gen({"format": data_format, "path": str(tmp_path / name), "columns": PARQUET_TYPES})
        assert splits == expected, name


def test_shipped_tfrecords_pass_through_unchanged(run_example_gen):
    files = sorted((EXTERNAL / "tfrecord").glob("*.gz"))
    originals = [tf.train.Example.FromString(r.numpy())
                 for r in tf.data.TFRecordDataset([str(f) for f in files], compression_type="GZIP")]
    splits, _ = run_example_gen({"format": "tfrecord", "path": str(EXTERNAL / "tfrecord")})
    produced = [tf.train.Example.FromString(r) for records in splits.values() for r in records]
    assert len(produced) == len(originals) == 15000

    def values(example):  # empty feature lists are missing values: ExampleGen leaves them out
        return {k: list(getattr(f, f.WhichOneof("kind")).value) for k, f in example.features.feature.items()
                if f.WhichOneof("kind") and getattr(f, f.WhichOneof("kind")).value}

    def key(example):
        return json.dumps(values(example), sort_keys=True, default=str)

    assert sorted(map(key, produced)) == sorted(map(key, originals))


def test_missing_values_stay_missing(run_example_gen, tmp_path):
    (tmp_path / "d.csv").write_text("a,b,c\n1,,x\n2,2.5,\n3,1.5,y\n4,0.5,z\n5,1,w\n")
    splits, _ = run_example_gen({"format": "csv", "path": ".", "splits": {"train": "d.csv", "eval": "d.csv"}},
                                folder=tmp_path)
    examples = {tf.train.Example.FromString(r).features.feature["a"].int64_list.value[0]:
                tf.train.Example.FromString(r).features.feature for r in splits["train"]}
    assert "b" not in examples[1] and "c" not in examples[2]
    assert list(examples[2]["b"].float_list.value) == [2.5]
    assert list(examples[3]["c"].bytes_list.value) == [b"y"]


def test_split_membership_does_not_depend_on_workers(run_example_gen):
    data = {"format": "csv", "path": str(EXTERNAL / "csv" / "data.csv"), "split_key": "trip_start_timestamp",
            "splits": {"train": 0.7, "eval": 0.2, "test": 0.1}}
    one, _ = run_example_gen(data)
    two, _ = run_example_gen(data, direct_args("multi_processing", 2))
    assert one == two
    assert set(one) == {"train", "eval", "test"}


def test_pattern_splits(run_example_gen, tmp_path):
    (tmp_path / "in").mkdir()
    shutil.copy(EXTERNAL / "csv" / "data.csv", tmp_path / "in" / "train.csv")
    shutil.copy(EXTERNAL / "csv" / "data2.csv", tmp_path / "in" / "eval.csv")
    splits, examples = run_example_gen({"format": "csv", "path": "in", "splits": {"train": "train.csv",
                                                                                "eval": "eval*.csv"}},
                                       folder=tmp_path)
    assert json.loads(examples.split_names) == ["train", "eval"]
    assert len(splits["train"]) == 10000
    with open(EXTERNAL / "csv" / "data2.csv", newline="") as handle:
        assert len(splits["eval"]) == sum(1 for _ in csv.reader(handle)) - 1


BAD_CSV = "x,y\n1,a\n2,b,extra\n3,c\n4\n5,e\n"


# Beam re-raises errors from inside a pipeline as RuntimeError with the original message, so the tests
# match the message: it is what the user sees.
@pytest.mark.reliability("bad data")
def test_bad_records_fail_names_the_line(run_example_gen, tmp_path):
    (tmp_path / "bad.csv").write_text(BAD_CSV)
    with pytest.raises(Exception, match=r"bad\.csv:3: ragged row: 3 fields where the header has 2"):
        run_example_gen({"format": "csv", "path": "bad.csv"}, folder=tmp_path)


@pytest.mark.reliability("bad data")
def test_bad_records_skip_counts(run_example_gen, tmp_path):
    (tmp_path / "bad.csv").write_text(BAD_CSV + "6,f\n7,g\n")
    splits, examples = run_example_gen({"format": "csv", "path": ".", "bad_records": "skip",
                                        "splits": {"train": "bad.csv", "eval": "bad.csv"}}, folder=tmp_path)
    assert len(splits["train"]) == 5
    assert json.loads(examples.get_string_custom_property("tfxd_bad_records")) == {"ragged row": 4}  # 2 a split


@pytest.mark.reliability("bad data")
def test_pinned_type_mismatch_is_a_bad_record(run_example_gen, tmp_path):
    (tmp_path / "d.jsonl").write_text('{"x": 1}\n{"x": "two"}\n{"x": 3}\n')
    with pytest.raises(Exception, match=r"d\.jsonl:2: value does not fit its column: column 'x': 'two' is "
                                             r"not an integer"):
        run_example_gen({"format": "jsonl", "path": "d.jsonl", "columns": {"x": "int"}, "splits": {"train": 0.5, "eval": 0.5}},
                        folder=tmp_path)


@pytest.mark.reliability("bad data")
def test_invalid_json_line(run_example_gen, tmp_path):
    (tmp_path / "d.jsonl").write_text('{"x": 1}\n{"x": \n')
    with pytest.raises(Exception, match=r"d\.jsonl:2: invalid JSON"):
        run_example_gen({"format": "jsonl", "path": "d.jsonl", "splits": {"train": 0.5, "eval": 0.5}}, folder=tmp_path)


@pytest.mark.reliability("bad data")
@pytest.mark.parametrize(("content", "message"), [("", "is empty"), ("a,b\n", "has a header but no rows")])
def test_empty_and_header_only_files_name_the_path(run_example_gen, tmp_path, content, message):
    (tmp_path / "d.csv").write_text(content)
    with pytest.raises(Exception, match=rf"d\.csv {message}"):
        run_example_gen({"format": "csv", "path": "d.csv"}, folder=tmp_path)


@pytest.mark.reliability("bad data")
def test_a_split_that_ends_up_empty(run_example_gen, tmp_path):
    (tmp_path / "d.csv").write_text("a\n1\n")
    with pytest.raises(Exception, match="ended up empty"):
        run_example_gen({"format": "csv", "path": "d.csv", "splits": {"train": 0.5, "eval": 0.5}}, folder=tmp_path)
