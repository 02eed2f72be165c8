"""The data section -> ExampleGen's configs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import BASE_SPEC, write_spec
from tfxd import reader_config
from tfxd.pipeline.assembly.configs import example_gen_config, hash_buckets
from tfxd.pipeline.spec.load import load_spec
from tfxd.reader_config import LabelCheck, ReaderConfig


@pytest.mark.parametrize(("ratios", "buckets"), [
    ({"train": 0.8, "eval": 0.2}, [("train", 4), ("eval", 1)]),
    ({"train": 0.7, "eval": 0.2, "test": 0.1}, [("train", 7), ("eval", 2), ("test", 1)]),
    ({"train": 0.333, "eval": 0.667}, [("train", 333), ("eval", 667)]),
    ({"train": 1.0}, [("train", 1)]),
])
def test_hash_buckets_keep_the_ratios(ratios, buckets):
    assert hash_buckets(ratios) == buckets


def test_single_file(project):
    config = example_gen_config(load_spec(str(write_spec(project, BASE_SPEC))))
    assert (config.input_base, config.input_splits) == (str(project), [("single_split", "data.csv")])
    assert config.reader == ReaderConfig("csv", "fail", numeric=("target", "x"), label=LabelCheck("target", "binary"))
    assert json.loads(config.reader.to_json()) == {  # the exec property, as compiled files hold it
        "format": "csv", "columns": {}, "bad_records": "fail", "project": None, "numeric": ["target", "x"],
        "label": {"column": "target", "task": "binary", "num_classes": None}}
    assert reader_config.read(config.reader.to_json()) == config.reader


def test_glob_and_patterns(project):
    (project / "parts").mkdir()
    (project / "parts" / "a.csv").write_text("x,city,target\n1,a,1\n")
    spec = BASE_SPEC.replace("path: data.csv", "path: 'parts/*.csv'")
    config = example_gen_config(load_spec(str(write_spec(project, spec))))
    assert (config.input_base, config.input_splits) == (str(project / "parts"), [("single_split", "*.csv")])
    spec = BASE_SPEC.replace("path: data.csv", "path: parts\n  splits: {train: 'a*.csv', eval: 'a.csv'}")
    config = example_gen_config(load_spec(str(write_spec(project, spec))))
    assert config.input_splits == [("train", "a*.csv"), ("eval", "a.csv")] and config.output_buckets == []
