"""The column-wise CSV reader against the row-wise one it stands in for: the same column kinds and, row by
row, the same tf.Example bytes (so the same splits); what it cannot read exactly it hands back."""

from __future__ import annotations

import pytest

from tests.components.example_gen.conftest import EXTERNAL
from tfxd.components.example_gen import csv_columns, input_files, records
from tfxd.reader_config import LabelCheck, ReaderConfig

LONG_NAME = "a_column_name_" + "x" * 140  # a map entry longer than 127 bytes: two-byte length varints
TRICKY = (
    f"num,neg,flt,txt,nan_float,nan_int,sparse,big,{LONG_NAME},uni\n"
    '1,-5,1.5,"a, quoted ""text""",nan,1,,9223372036854775807,1,é\n'
    '2,-9223372036854775808,1e-45,"two\nlines",2.5,NaN,x,0,2,日本\n'
    "003,+7,.5,,-NaN,3,,1,3,\n"
    f"4,0,3.4028234e38,{'y' * 70000},1e3,4,,2,4,ok\n"
)


def _both(path: str, numeric: frozenset[str] = frozenset(), pinned: dict | None = None):
    """(kinds, examples) read column-wise and row by row."""
    names = csv_columns.header(path, input_files.open_file)
    columnar_kinds: dict = {}
    for batch in csv_columns.batches(path, input_files.open_file, names):
        columnar_kinds = records.TypeInferenceState.merge([columnar_kinds, csv_columns.kinds(batch, numeric)])
    rows = list(records.read_csv(path, input_files.open_file))
    row_kinds: dict = {}
    for row in rows:
        records.TypeInferenceState.add(row_kinds, row.values, numeric)
    types = records.final_types(row_kinds, pinned or {})
    columnar = [example for batch in csv_columns.batches(path, input_files.open_file, names)
                for example in csv_columns.example_bytes(batch, types, None).to_pylist()]
    by_row = []
    for row in rows:
        features, problem = records.encode(row.values, types)
        assert problem is None, problem
        by_row.append(records.example_bytes(features, types))
    return (columnar_kinds, row_kinds), (columnar, by_row)


def test_the_taxi_data_gives_the_same_kinds_and_bytes():
    (columnar_kinds, row_kinds), (columnar, by_row) = _both(str(EXTERNAL / "csv" / "data.csv"))
    assert columnar_kinds == row_kinds
    assert len(columnar) == 10000 and columnar == by_row


def test_tricky_values_give_the_same_kinds_and_bytes(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(TRICKY, encoding="utf-8")
    (columnar_kinds, row_kinds), (columnar, by_row) = _both(str(path))
    assert columnar_kinds == row_kinds == {
        "num": "int", "neg": "int", "flt": "float", "txt": "string", "nan_float": "float", "nan_int": "int",
        "sparse": "string", "big": "int", LONG_NAME: "int", "uni": "string"}
    assert columnar == by_row
    assert records.example_bytes({}, {}) == b""  # a row with nothing present: no features at all


def test_pinned_kinds_give_the_same_bytes(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(TRICKY, encoding="utf-8")
    _, (columnar, by_row) = _both(str(path), pinned={"num": "string", "neg": "float", "flt": "string"})
    assert columnar == by_row


# columns whose first values (csv_columns._HEAD of them are looked at first) show a narrower kind than
# the rest, or the same: the head settles nothing the whole column does not
HEAD_AND_TAIL = {
    "ints_then_a_float": (["7"] * 3000 + ["7.5"], "float"),
    "ints_then_a_word": (["7"] * 3000 + ["seven"], "string"),
    "floats_then_a_word": (["1.5"] * 3000 + ["x"], "string"),
    "floats_then_nan": (["1.5"] * 3000 + ["NaN", "nan"], "float"),
    "ints_then_nan": (["3"] * 3000 + ["-NaN"], "int"),
    "a_word_first": (["w"] + ["2"] * 3000, "string"),
    "nan_first_then_ints": (["nan"] * 1100 + ["2"] * 2000, "int"),
    "ints_then_an_exponent": (["1"] * 3000 + ["1e3"], "float"),
    "words_late": (["1.0"] * 1500 + ["a", "b"] * 800, "string"),
    "numeric_words": (["x"] + ["5"] * 3000 + ["5.5"], "float"),  # data.numeric: words are bad records
}


def test_kinds_of_long_columns_are_every_values_not_their_heads(tmp_path):
    """The judge: the row-wise reader's kinds, from every row (the bite: a head of 1024 values alone would
    call most of these columns narrower)."""
    rows = max(len(values) for values, _ in HEAD_AND_TAIL.values())
    names = list(HEAD_AND_TAIL)
    lines = [",".join(names)] + [",".join(HEAD_AND_TAIL[name][0][row] if row < len(HEAD_AND_TAIL[name][0]) else ""
                                         for name in names) for row in range(rows)]
    path = tmp_path / "d.csv"
    path.write_text("\n".join(lines) + "\n")
    numeric = frozenset({"numeric_words"})
    names_read = csv_columns.header(str(path), input_files.open_file)
    (batch,) = csv_columns.batches(str(path), input_files.open_file, names_read)
    row_kinds: dict = {}
    for row in records.read_csv(str(path), input_files.open_file):
        records.TypeInferenceState.add(row_kinds, row.values, numeric)
    assert csv_columns.kinds(batch, numeric) == row_kinds == {name: kind for name, (_, kind) in HEAD_AND_TAIL.items()}


@pytest.mark.parametrize("content, why", [
    ("a,b\n1,2\n3\n", "ragged"),
    ("a,b\n1,\xe9\n", "not UTF-8"),
    ("a,b\n1,2\x003\n", "NUL"),
    ('"a\nb",c\n1,2\n', "header over two lines"),
])
def test_what_it_cannot_read_exactly_is_handed_back(tmp_path, content, why):
    path = tmp_path / "d.csv"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(csv_columns.NotColumnar):
        names = csv_columns.header(str(path), input_files.open_file)
        list(csv_columns.batches(str(path), input_files.open_file, names))


@pytest.mark.parametrize("values, kind", [
    (" 5,6", "int"),  # Python's int() strips; Arrow does not: the row-wise conversion decides
    ("inf,1.5", "float"),  # infinities are bad records, named by the row-wise reader
    ("1_000,2", "int"),
    ("99999999999999999999,1", "int"),  # beyond 64 bits: a bad record
    ("abc,1", "int"),  # a word in a number column (numeric) is a bad record
])
def test_numbers_only_python_reads_are_handed_back(tmp_path, values, kind):
    path = tmp_path / "d.csv"
    path.write_text("x\n" + "\n".join(f'"{value}"' for value in values.split(",")) + "\n")
    names = csv_columns.header(str(path), input_files.open_file)
    batch = next(csv_columns.batches(str(path), input_files.open_file, names))
    assert csv_columns.kinds(batch, frozenset({"x"}))["x"] == kind
    with pytest.raises(csv_columns.NotColumnar):
        csv_columns.example_bytes(batch, {"x": kind}, None)


def test_a_label_that_is_not_a_class_is_handed_back(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("y\n0\n1\n2\n")
    names = csv_columns.header(str(path), input_files.open_file)
    batch = next(csv_columns.batches(str(path), input_files.open_file, names))
    with pytest.raises(csv_columns.NotColumnar):
        csv_columns.example_bytes(batch, {"y": "int"}, LabelCheck("y", "binary"))
    assert len(csv_columns.example_bytes(batch, {"y": "int"}, LabelCheck("y", "multiclass", 3))) == 3


def test_records_split_as_tfx_partitions_them():
    from tfx.components.example_gen.base_example_gen_executor import _PartitionFn
    from tfx.proto import example_gen_pb2

    from tfxd.components.example_gen.columnar import _WriteFile

    writer = _WriteFile(ReaderConfig("csv", "fail"), [("train", 4), ("eval", 5)], "")
    config = example_gen_pb2.SplitConfig()
    _, (columnar, _) = _both(str(EXTERNAL / "csv" / "data.csv"))
    for example in columnar[:2000]:
        assert writer._split_of(example) == ["train", "eval"][_PartitionFn(example, 2, [4, 5], config)]
