"""ExampleGen's reader config crosses from the assembly into a compiled file and back into an executor on
another machine: one type, one writer, one reader, and the JSON the dicts it replaced wrote (compiled
files hold it, so a change here would change every compiled file)."""

from __future__ import annotations

import json

import pytest

from tfxd import keys, reader_config
from tfxd.reader_config import LabelCheck, ReaderConfig, SpanReading

FULL = ReaderConfig(
    format="csv", bad_records="skip", columns={"zip": "string"}, project="p", numeric=("fare", "miles"),
    label=LabelCheck("tips", "multiclass", 3), needs={"fare": "features[0].name"},
    spans=SpanReading({"scheduled": -1, "unscheduled": "fail"}, "skip", {"train": "train/*.csv"},
                      path="gs://b/data/{YYYY}-{MM}-{DD}", pushed_to="gs://b/serving", drift_store="gs://b/drift",
                      local=True))


@pytest.mark.parametrize("config", [
    FULL, ReaderConfig("tfrecord", "fail"), ReaderConfig("bigquery", "fail", project="p", needs={}),
    ReaderConfig("csv", "fail", spans=SpanReading("latest", "train")),
])
def test_what_is_written_is_read_back(config):
    assert reader_config.read(config.to_json()) == config
    assert reader_config.of({keys.READER_CONFIG_KEY: config.to_json()}) == config


def test_a_key_is_written_only_where_it_says_something():
    assert json.loads(ReaderConfig("csv", "fail").to_json()) == {
        "format": "csv", "columns": {}, "bad_records": "fail", "project": None}
    # needs: {} says "the spec reads no column" (validate could not read the data's columns): kept
    assert json.loads(ReaderConfig("jsonl", "fail", needs={}).to_json())["needs"] == {}
    # spans before the assembly placed them for the target: no path, no push destination
    assert json.loads(ReaderConfig("csv", "fail", spans=SpanReading("latest", "fail")).to_json())["spans"] == {
        "choice": "latest", "on_no_new_data": "fail", "splits": {}}
    assert json.loads(FULL.to_json())["spans"] == {
        "choice": {"scheduled": -1, "unscheduled": "fail"}, "on_no_new_data": "skip",
        "splits": {"train": "train/*.csv"}, "path": "gs://b/data/{YYYY}-{MM}-{DD}", "pushed_to": "gs://b/serving",
        "drift_store": "gs://b/drift", "local": True}
    assert FULL.to_json() == json.dumps(json.loads(FULL.to_json()), sort_keys=True)  # sorted: a stable file


def test_the_label_knows_its_classes_and_bad_records_can_be_skipped():
    assert (LabelCheck("y", "binary").classes, LabelCheck("y", "multiclass", 5).classes) == (2, 5)
    assert ReaderConfig("csv", "fail").skipping_bad_records().skips_bad_records
    assert not ReaderConfig("csv", "fail").skips_bad_records


def test_spans_the_assembly_never_placed_are_refused_where_the_executor_reads_them():
    assert FULL.spans is not None and FULL.spans.placed() == ("gs://b/data/{YYYY}-{MM}-{DD}", "gs://b/serving")
    with pytest.raises(ValueError, match="not placed for a target"):
        SpanReading("latest", "train").placed()


def test_a_config_without_its_format_is_refused_by_name():
    with pytest.raises(KeyError, match="format"):
        reader_config.read(json.dumps({"bad_records": "fail"}))
