"""The column-wise pipeline's kinds (columnar): a first pass reads each piece's first batch only, and the
writing pass checks the rest. A kind the first batches did not show, anywhere in the data, must still
give what the row-wise pipeline writes (its kinds come from every row): the pipeline runs again with
the kinds of all of it. The judge is the row-wise pipeline on the same files."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.components.example_gen.test_example_columns import _example, _write
from tfxd import keys
from tfxd.components.example_gen import columnar, example_columns, executor, parsed_examples

BLOCK = 100  # records a TFRecord block holds here (example_columns.MAX_BLOCK_RECORDS)


def _row(index: int, amount, **more) -> dict:
    return {"id": index, "amount": amount, "tips": index % 2, "fare": 1.0, **more}


def _ints(count: int, start: int = 0) -> list[dict]:
    return [_row(index, index) for index in range(start, start + count)]


def _floats(count: int, start: int) -> list[dict]:
    return [_row(index, index + 0.5) for index in range(start, start + count)]


def _late_feature(count: int, start: int) -> list[dict]:
    return [_row(index, index, late=f"t{index}") for index in range(start, start + count)]


def _words(count: int, start: int) -> list[dict]:
    return [_row(index, index, code=f"x{index}") for index in range(start, start + count)]


def _digits(count: int, start: int = 0) -> list[dict]:
    return [_row(index, index, code=str(index)) for index in range(start, start + count)]


# (first file's rows, second file's rows, the kinds the run again is given (a few of them), the pieces
# it writes: None for all, where a kind the first batches showed widened)
WIDER = {
    "a float in a later block": (_ints(600), _ints(300, 600) + _floats(300, 900), {"amount": "float"}, None),
    "a float from mid-block (row by row)": (_ints(600), _ints(350, 600) + _floats(250, 950), {"amount": "float"},
                                            None),
    "a feature only in later blocks": (_ints(600), _ints(400, 600) + _late_feature(200, 1000), {"late": "string"},
                                       [[1, 0]]),
    "words after numbers' texts": (_digits(600), _digits(300, 600) + _words(300, 900), {"code": "string"}, None),
}


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(example_columns, "MAX_BLOCK_RECORDS", BLOCK)
    monkeypatch.setattr(example_columns, "PROBE_RECORDS", 16)


@pytest.fixture
def kinds_given(monkeypatch):
    """The ``rerun`` each run of the column-wise pipeline was given (None: the first batches' kinds)."""
    given, examples = [], columnar.examples

    def spied(*args, **kwargs):
        given.append(args[8] if len(args) > 8 else kwargs.get("rerun"))
        return examples(*args, **kwargs)

    monkeypatch.setattr(columnar, "examples", spied)
    return given


def _tfrecords(folder, *files: list[dict]) -> dict:
    folder.mkdir()
    for index, rows in enumerate(files):
        _write(folder / f"part-{index}.tfrecord.gz", [_example(row) for row in rows])
    return {"format": "tfrecord", "path": str(folder / "*.gz")}


def _as_row_wise_writes(run_example_gen, monkeypatch, data: dict, columnar_run) -> None:
    monkeypatch.setattr(executor, "_columnar", lambda _: False)
    by_row, by_row_artifact = run_example_gen(data)
    examples, artifact = columnar_run
    assert examples == by_row
    for name in (keys.SPLIT_COUNTS_PROPERTY, keys.BAD_RECORDS_PROPERTY):
        assert artifact.get_string_custom_property(name) == by_row_artifact.get_string_custom_property(name)


@pytest.mark.parametrize("case", list(WIDER))
def test_a_kind_past_the_first_blocks_writes_every_file_again(run_example_gen, tmp_path, monkeypatch,
                                                              small_blocks, kinds_given, case):
    first, second, widened, pieces = WIDER[case]
    data = _tfrecords(tmp_path / "data", first, second)
    run = run_example_gen(data)
    assert kinds_given[0] is None
    assert len(kinds_given) == 2
    assert {name: kinds_given[1]["kinds"][name] for name in widened} == widened
    assert kinds_given[1]["pieces"] == pieces
    assert sum(map(len, run[0].values())) == len(first) + len(second)
    _as_row_wise_writes(run_example_gen, monkeypatch, data, run)


def test_a_piece_written_again_alone_counts_each_bad_record_once(run_example_gen, tmp_path, monkeypatch,
                                                                 small_blocks, kinds_given):
    """Only a new feature widened, so the other file's examples stand. Its bad records (a float where
    'amount' is pinned int; its blocks of two kinds read row by row) and those the rewritten file met
    before its new feature and again when written again are each counted once."""
    first = _ints(600)
    for row in first[1::50] + first[455::7]:
        row["amount"] += 0.5
    second = _ints(400, 600) + _late_feature(200, 1000)
    second[350]["amount"] += 0.5  # in a block after the first: the file is read row by row from there
    data = {**_tfrecords(tmp_path / "data", first, second), "bad_records": "skip", "columns": {"amount": "int"}}
    run = run_example_gen(data)
    assert kinds_given[1]["pieces"] == [[1, 0]]
    bad = [row for row in first + second if row["amount"] % 1]
    assert len(bad) == 1 + 12 + 21
    assert sum(map(len, run[0].values())) == len(first) + len(second) - len(bad)
    _as_row_wise_writes(run_example_gen, monkeypatch, data, run)


def test_a_pinned_columns_later_kinds_ask_for_no_run_again(run_example_gen, tmp_path, monkeypatch, small_blocks,
                                                           kinds_given):
    """A column pinned (data.columns) is written as pinned whatever its kinds: its floats after the first
    blocks are bad records there, as in the row-wise pipeline, and nothing is written again."""
    first, second, _, _ = WIDER["a float in a later block"]
    data = {**_tfrecords(tmp_path / "data", first, second), "bad_records": "skip", "columns": {"amount": "int"}}
    run = run_example_gen(data)
    assert kinds_given == [None]
    assert sum(map(len, run[0].values())) == len(first) + len(second) - 300
    _as_row_wise_writes(run_example_gen, monkeypatch, data, run)


def test_kinds_the_first_blocks_show_read_each_file_once_and_a_block(run_example_gen, tmp_path, monkeypatch,
                                                                    small_blocks, kinds_given):
    parsed, parse = [], parsed_examples.Parser.records

    def counted(self, records):
        parsed.append(int(records.shape[0]))
        return parse(self, records)

    monkeypatch.setattr(parsed_examples.Parser, "records", counted)
    data = _tfrecords(tmp_path / "data", _ints(600), _ints(600, 600) + _late_feature(0, 1200))
    run = run_example_gen(data)
    assert kinds_given == [None]
    assert len(parsed) == 2 + 2 * 6  # the first pass a block of each file, then each file's six
    _as_row_wise_writes(run_example_gen, monkeypatch, data, run)


def test_parquet_row_groups_past_the_first_are_checked(run_example_gen, tmp_path, monkeypatch, kinds_given):
    rows = _digits(300) + _words(300, 300)
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=BLOCK)
    data = {"format": "parquet", "path": str(path)}
    run = run_example_gen(data)
    assert kinds_given == [None, kinds_given[1]] and kinds_given[1]["kinds"]["code"] == "string"
    _as_row_wise_writes(run_example_gen, monkeypatch, data, run)


def test_unchecked_the_first_blocks_kinds_refuse_what_the_row_wise_pipeline_writes(run_example_gen, tmp_path,
                                                                                  monkeypatch, small_blocks):
    """The judge biting: with the check off, the first blocks' kinds make 'amount' an int column and the
    later floats bad records, where the row-wise pipeline writes every record with 'amount' a float."""
    monkeypatch.setattr(columnar, "_covered", lambda seen, found, pinned: True)
    first, second, _, _ = WIDER["a float in a later block"]
    data = _tfrecords(tmp_path / "data", first, second)
    with pytest.raises(Exception, match=r"part-1\.tfrecord\.gz#300: .*'amount': 900\.5 is not an integer"):
        run_example_gen(data)
    monkeypatch.setattr(executor, "_columnar", lambda _: False)
    assert sum(map(len, run_example_gen(data)[0].values())) == len(first) + len(second)
