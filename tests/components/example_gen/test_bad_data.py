"""Bad data at ExampleGen, one table: each case stops with the file:line (or the file) and the column
named, or, as a per-record problem under ``data.bad_records: skip``, is skipped and counted by reason.

What tfxd does with each kind of bad data:

- a column whose type changes mid-file (numbers, then words): column types are inferred over all the
  data (int < float < string, the widest wins), so such a column is a string column, unless the spec
  reads it as a number (a numeric transform, arithmetic or a comparison with a number in an expr, the
  label of a binary or regression task): then the words are bad records, "value does not fit its
  column: column 'fare': 'twelve' is not a number". (A column the spec reads as a number that holds
  nothing but words stays a string column: Transform, or ExampleValidator against a given schema, says
  so by feature.)
- NaN ("nan", "NaN", JSON NaN) as a whole value of a number column is a missing value, like an empty
  field (Transform fills it); NaN inside a list, and infinities ("inf", "-inf", "1e400", JSON
  Infinity), are bad records "not finite", so no infinity ever reaches training.
- bytes that are not UTF-8: bad record "not UTF-8" (csv and jsonl).
- a NUL byte in a CSV line: bad record "unreadable CSV".
- an integer outside 64 bits: bad record, "is outside the 64-bit integer range".
- very long strings (1 MB in one field) are read and kept whole.
- columns the spec does not name pass through to the examples.
- a column the spec reads that no record has, where `tfxd validate` could not read the data's columns
  (jsonl, tfrecord, bigquery): ExampleGen stops naming the column, where the spec reads it and the input.
- a label column value that is not a class of the task (binary: 0 or 1; multiclass: 0 to
  num_classes - 1): bad record "unexpected label". (String labels of a multiclass task, and labels
  computed by an expr, are checked in Transform: tests/components/transform/test_labels.py.)

Empty files, header-only files, ragged rows, invalid JSON and a split that ends up empty are in
test_executor.py.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import tensorflow as tf

from tests.components.example_gen import conftest

ROWS = [f"{i}.5,{i % 3},c{i % 4}\n" for i in range(20)]
AT = 5  # the bad line goes after this many good rows: it is line AT + 2 of a CSV file (line 1: header)
LINE = AT + 2
RATIOS = {"train": 0.5, "eval": 0.5}
LONG = "x" * 1_000_000


def csv_with(bad_line: str | bytes, header: str = "fare,tips,company\n") -> bytes:
    def raw(text: str | bytes) -> bytes:
        return text if isinstance(text, bytes) else text.encode("utf-8")

    return raw(header) + b"".join(map(raw, ROWS[:AT])) + raw(bad_line) + b"".join(map(raw, ROWS[AT:]))


def jsonl_with(bad_line: str | bytes) -> bytes:
    good = [json.dumps({"fare": i + 0.5, "tips": i % 3, "company": f"c{i % 4}"}) + "\n" for i in range(20)]
    bad = bad_line if isinstance(bad_line, bytes) else bad_line.encode("utf-8")
    return "".join(good[:AT + 1]).encode("utf-8") + bad + "".join(good[AT + 1:]).encode("utf-8")


def tfrecord_of(rows: list[dict[str, float]]) -> Callable[[], bytes]:
    """Uncompressed TFRecords of float features (built when the case runs)."""

    def build() -> bytes:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "data.tfrecord")
            with tf.io.TFRecordWriter(path) as writer:
                for row in rows:
                    writer.write(tf.train.Example(features=tf.train.Features(feature={
                        name: tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                        for name, value in row.items()})).SerializeToString())
            with open(path, "rb") as handle:
                return handle.read()

    return build


@dataclass(frozen=True)
class Read:
    """The run succeeds: ``examples`` records in all, ``bad`` counted by reason, ``check`` on the examples."""

    examples: int
    bad: dict[str, int] = field(default_factory=dict)
    check: Callable[[list[tf.train.Example]], None] | None = None


def fare_missing(count: int) -> Callable[[list[tf.train.Example]], None]:
    def check(examples: list[tf.train.Example]) -> None:
        assert sum("fare" not in e.features.feature for e in examples) == count

    return check


def has_long_company(examples: list[tf.train.Example]) -> None:
    assert [e for e in examples if e.features.feature["company"].bytes_list.value[0] == LONG.encode()]


def code_is_text(examples: list[tf.train.Example]) -> None:
    assert all(e.features.feature["code"].bytes_list.value for e in examples)


def has_note(examples: list[tf.train.Example]) -> None:
    assert all(e.features.feature["note"].bytes_list.value[0] == b"extra" for e in examples)


CSV = {"format": "csv", "path": "d.csv", "splits": RATIOS}
JSONL = {"format": "jsonl", "path": "d.jsonl", "splits": RATIOS}
SKIP = {"bad_records": "skip"}
UNFIT = "value does not fit its column"

# per-record problems of csv and jsonl, all in one file each, under bad_records: skip (a NaN row is kept)
CSV_BAD_LINES = ["twelve,1,c1\n", "3.5,lots,c1\n", "3.5,99999999999999999999,c1\n", "inf,1,c1\n", "-inf,1,c1\n",
                 "1e400,1,c1\n", b"3.5,1,caf\xe9\n", "3.5,1,c\x001\n", "nan,1,c1\n"]
JSONL_BAD_LINES = ['{"fare": "twelve", "tips": 1}\n', '{"fare": -Infinity}\n', '{"fare": [1.0, NaN]}\n',
                   b'{"company": "caf\xe9"}\n', '{"fare": NaN, "tips": 1}\n']


def lines(items: list[str | bytes]) -> bytes:
    return b"".join(item if isinstance(item, bytes) else item.encode("utf-8") for item in items)


# (id, file name, content, data section, expected: a regex of the error, or Read)
BAD_DATA_CASES: list[tuple[str, str, bytes | Callable[[], bytes], dict, str | Read]] = [
    # a column whose type changes mid-file
    ("type-changes-mid-file", "d.csv", csv_with("twelve,1,c1\n"), CSV,
     rf"d\.csv:{LINE}: {UNFIT}: column 'fare': 'twelve' is not a number \(set data\.bad_records: skip"),
    ("type-changes-in-an-expr-column", "d.csv", csv_with("3.5,lots,c1\n"), CSV,
     rf"d\.csv:{LINE}: {UNFIT}: column 'tips': 'lots' is not an integer"),
    ("type-changes-mid-file-jsonl", "d.jsonl", jsonl_with('{"fare": "twelve", "tips": 1}\n'), JSONL,
     rf"d\.jsonl:{LINE}: {UNFIT}: column 'fare': 'twelve' is not a number"),
    ("type-changes-in-a-column-the-spec-does-not-read", "d.csv",
     ("fare,tips,company,code\n" + "".join(row.rstrip("\n") + f",{i}\n" for i, row in enumerate(ROWS))
      + "3.5,1,c1,seven\n").encode(), CSV, Read(21, check=code_is_text)),
    # NaN and infinities
    ("nan-is-missing", "d.csv", csv_with("nan,1,c1\nNaN,2,c2\n"), CSV, Read(22, check=fare_missing(2))),
    ("json-NaN-is-missing", "d.jsonl", jsonl_with('{"fare": NaN, "tips": 1}\n'), JSONL,
     Read(21, check=fare_missing(1))),
    ("inf", "d.csv", csv_with("inf,1,c1\n"), CSV,
     rf"d\.csv:{LINE}: not finite: column 'fare': 'inf' is not a finite number"),
    ("json-Infinity", "d.jsonl", jsonl_with('{"fare": -Infinity, "tips": 1}\n'), JSONL,
     rf"d\.jsonl:{LINE}: not finite: column 'fare': -inf is not a finite number"),
    ("nan-inside-a-list", "d.jsonl", jsonl_with('{"fare": [1.0, NaN], "tips": 1}\n'), JSONL,
     rf"d\.jsonl:{LINE}: not finite: column 'fare': nan is NaN inside a list"),
    # bytes and sizes
    ("not-utf-8-csv", "d.csv", csv_with(b"3.5,1,caf\xe9\n"), CSV,
     rf"d\.csv:{LINE}: not UTF-8: the record has bytes that are not UTF-8 text"),
    ("not-utf-8-jsonl", "d.jsonl", jsonl_with(b'{"fare": 1.5, "tips": 1, "company": "caf\xe9"}\n'), JSONL,
     rf"d\.jsonl:{LINE}: not UTF-8: the line has bytes that are not UTF-8 text"),
    ("nul-byte", "d.csv", csv_with("3.5,1,c\x001\n"), CSV, rf"d\.csv:{LINE}: unreadable CSV: line contains NUL"),
    ("int-beyond-64-bits", "d.csv", csv_with("3.5,99999999999999999999,c1\n"), CSV,
     rf"d\.csv:{LINE}: {UNFIT}: column 'tips': '99999999999999999999' is outside the 64-bit integer range"),
    ("one-mb-string-csv", "d.csv", csv_with(f"3.5,1,{LONG}\n"), CSV, Read(21, check=has_long_company)),
    ("one-mb-string-jsonl", "d.jsonl", jsonl_with(json.dumps({"fare": 1.5, "tips": 1, "company": LONG}) + "\n"),
     JSONL, Read(21, check=has_long_company)),
    # columns
    ("extra-columns-pass-through", "d.csv",
     b"fare,tips,company,note\n" + b"".join(row.encode().rstrip(b"\n") + b",extra\n" for row in ROWS), CSV,
     Read(20, check=has_note)),
    ("needed-column-missing-jsonl", "d.jsonl",
     "".join(json.dumps({"fare": i + 0.5, "company": "c"}) + "\n" for i in range(20)).encode(), {**JSONL, **SKIP},
     r"the spec reads column 'tips' \(label\.expr\), and no record of \S*d\.jsonl has it; the data has: "
     r"company, fare"),
    ("needed-column-missing-tfrecord", "d.tfrecord", tfrecord_of([{"tips": float(i)} for i in range(20)]),
     {"format": "tfrecord", "path": "d.tfrecord", "splits": RATIOS},
     r"the spec reads column 'fare' \(features\[0\]\.name\), and no record of \S*d\.tfrecord has it; "
     r"the data has: tips"),
    # every per-record problem above, skipped and counted
    ("skip-csv", "d.csv", csv_with(lines(CSV_BAD_LINES)), {**CSV, **SKIP},
     Read(21, {UNFIT: 3, "not finite": 3, "not UTF-8": 1, "unreadable CSV": 1}, check=fare_missing(1))),
    ("skip-jsonl", "d.jsonl", jsonl_with(lines(JSONL_BAD_LINES)), {**JSONL, **SKIP},
     Read(21, {UNFIT: 1, "not finite": 2, "not UTF-8": 1}, check=fare_missing(1))),
]


def run_case(run_example_gen, folder, name: str, content: bytes | Callable[[], bytes], data: dict,
             expected: str | Read) -> None:
    (folder / name).write_bytes(content() if callable(content) else content)
    if isinstance(expected, str):
        with pytest.raises(Exception, match=expected):  # Beam re-raises as RuntimeError: match the message
            run_example_gen(data, folder=folder)
        return
    splits, artifact = run_example_gen(data, folder=folder)
    examples = [tf.train.Example.FromString(r) for records in splits.values() for r in records]
    assert len(examples) == expected.examples
    assert json.loads(artifact.get_string_custom_property("tfxd_bad_records")) == expected.bad
    if expected.check:
        expected.check(examples)


def failure_cases(cases: list[tuple]) -> list:
    """The cases as pytest params, those with bad data (an error expected, or records skipped) marked as
    reliability cases; valid data that looks odd (NaN as missing, 1 MB fields, extra columns) is not one."""
    return [pytest.param(*case[1:], id=case[0], marks=[pytest.mark.reliability("bad data")]
                         if isinstance(case[-1], str) or case[-1].bad else []) for case in cases]


@pytest.mark.parametrize(("name", "content", "data", "expected"), failure_cases(BAD_DATA_CASES))
def test_bad_data(run_example_gen, tmp_path, name, content, data, expected):
    run_case(run_example_gen, tmp_path, name, content, data, expected)


# label cases need a spec whose label is a column: (id, label section, bad lines of "fare,y", data, expected)
BINARY, MULTICLASS = {"task": "binary"}, {"task": "multiclass", "num_classes": 3}
LABEL_CASES: list[tuple[str, dict, str, dict, str | Read]] = [
    ("binary-label-2", BINARY, "3.5,2\n", CSV,
     rf"d\.csv:{LINE}: unexpected label: label column 'y': 2 is not a class of a binary label \(0 or 1\); "
     r"compute the label with label\.expr"),
    ("binary-label-maybe", BINARY, "3.5,maybe\n", CSV,
     rf"d\.csv:{LINE}: {UNFIT}: column 'y': 'maybe' is not an integer"),
    ("multiclass-label-beyond-num-classes", MULTICLASS, "3.5,3\n", CSV,
     rf"d\.csv:{LINE}: unexpected label: label column 'y': 3 is not a class id of a multiclass label with "
     r"num_classes 3 \(0 to 2\); fix the data or raise label\.num_classes"),
    ("binary-skip", BINARY, "3.5,2\n3.5,maybe\n", {**CSV, **SKIP}, Read(20, {"unexpected label": 1, UNFIT: 1})),
    ("multiclass-skip", MULTICLASS, "3.5,3\n3.5,-1\n3.5,1.5\n", {**CSV, **SKIP}, Read(20, {"unexpected label": 3})),
]


@pytest.mark.reliability("bad data")
@pytest.mark.parametrize(("label", "bad_line", "data", "expected"), [case[1:] for case in LABEL_CASES],
                         ids=[case[0] for case in LABEL_CASES])
def test_bad_label(run_example_gen, tmp_path, monkeypatch, label, bad_line, data, expected):
    def spec_text(data_section: dict) -> str:
        return json.dumps({"tfxd": 1, "name": "eg-test", "data": data_section,
                           "features": [{"name": "fare", "transform": "zscore"}],
                           "label": {"name": "y", **label}})

    monkeypatch.setattr(conftest, "spec_text", spec_text)
    rows = [f"{i}.5,{i % 2}\n" for i in range(20)]
    content = ("fare,y\n" + "".join(rows[:AT]) + bad_line + "".join(rows[AT:])).encode()
    run_case(run_example_gen, tmp_path, "d.csv", content, data, expected)
