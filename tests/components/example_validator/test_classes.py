"""A multiclass label's classes, checked by ExampleValidator on TFDV's own statistics of each split: a
class only the eval split has, and more classes than label.num_classes, stop the run before Transform
with the values, the split and the fix."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import write_spec
from tests.pipeline.run.test_run_taxi import statuses, summaries, tfxd
from tfxd.components.example_validator.classes import classes, problems

LABEL = {"column": "species", "num_classes": 3}


def _statistics(values: list[str]):
    import tensorflow_data_validation as tfdv

    return tfdv.generate_statistics_from_dataframe(pd.DataFrame({"species": values, "x": range(len(values))}))


@pytest.mark.reliability("bad data")
def test_a_class_only_the_eval_split_has_is_named_with_its_records():
    train = classes(_statistics(["Adelie", "Gentoo"] * 10), "species")
    evaluation = classes(_statistics(["Adelie", "Chinstrap", "Chinstrap"]), "species")
    assert train == ({"Adelie": 10, "Gentoo": 10}, 2)
    [found] = problems(LABEL, {"train": train, "eval": evaluation})
    assert found.startswith("label column 'species': class 'Chinstrap' (2 records) appears in the eval split but "
                            "never in train, so the model cannot learn it (Transform would give it id -1)")


@pytest.mark.reliability("bad data")
def test_more_classes_than_num_classes_and_numbers_are_left_to_example_gen():
    train = classes(_statistics(["a", "b", "c", "d", "a"]), "species")
    assert problems(LABEL, {"train": train}) == [
        "label column 'species' has 4 classes in the train split, more than label.num_classes 3: raise "
        "label.num_classes to 4, or fix the data"]
    assert classes(_statistics(["a"]), "x") is None  # a column of numbers: ExampleGen checks its class ids
    fine = {"train": ({"a": 2, "b": 1, "c": 1}, 3), "eval": ({"a": 1, "c": 1}, 2)}
    assert problems(LABEL, fine) == []


SPEC = """\
tfxd: 1
name: classes
data:
  format: csv
  path: data
  splits: {train: 'train/*', eval: 'eval/*'}
features:
  - {name: x, transform: zscore}
label: {name: species, task: multiclass, num_classes: 3}
training: {batch_size: 8, steps: 4, eval_steps: 1}
beam: {workers: 1}
"""


@pytest.mark.reliability("bad data")
def test_the_run_stops_at_the_example_validator_naming_the_class_and_the_split(tmp_path):
    for split, names in (("train", ["Adelie", "Gentoo"] * 20), ("eval", ["Adelie", "Chinstrap"] * 5)):
        (tmp_path / "data" / split).mkdir(parents=True)
        rows = "".join(f"{index * 0.5},{name}\n" for index, name in enumerate(names))
        (tmp_path / "data" / split / "penguins.csv").write_text("x,species\n" + rows)
    write_spec(tmp_path, SPEC)
    result = tfxd("run", "spec.yaml", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert ("ExampleValidator failed: label column 'species': class 'Chinstrap' (5 records) appears in the eval "
            "split but never in train") in message
    assert "Traceback" not in result.stderr
    assert statuses(summaries(tmp_path, "classes")[-1])["Transform"] == "not run"
