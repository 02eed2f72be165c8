"""A multiclass label's classes, checked by ExampleValidator on TFDV's own statistics of each split: a
class only the eval split has, and more classes than label.num_classes, stop the run before Transform
with the values, the split and the fix."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import write_spec
from tests.pipeline.run.test_run_taxi import statuses, summaries, tfxd
from tfxd.components.example_validator.classes import classes, complete, from_examples, problems

LABEL = {"column": "species", "num_classes": 3}


def _statistics(values: list[str], kept: int | None = None):
    import tensorflow_data_validation as tfdv

    options = tfdv.StatsOptions(num_top_values=kept, num_rank_histogram_buckets=kept) if kept else None
    return tfdv.generate_statistics_from_dataframe(pd.DataFrame({"species": values, "x": range(len(values))}),
                                                   stats_options=options or tfdv.StatsOptions())


def _examples(folder, by_split: dict[str, list[str]]):
    """An Examples artifact as ExampleGen writes it: gzipped TFRecords of tf.Example per split."""
    import tensorflow as tf
    from tfx.types import artifact_utils, standard_artifacts

    examples = standard_artifacts.Examples()
    examples.uri = str(folder)
    examples.split_names = artifact_utils.encode_split_names(list(by_split))
    for split, values in by_split.items():
        (folder / f"Split-{split}").mkdir(parents=True)
        with tf.io.TFRecordWriter(str(folder / f"Split-{split}" / "data_tfrecord-00000-of-00001.gz"),
                                  options="GZIP") as writer:
            for value in values:
                feature = {"species": tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return examples


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


@pytest.mark.reliability("bad data")
def test_when_the_statistics_list_only_some_classes_they_are_counted_in_the_examples(tmp_path):
    """TFDV keeps a bounded histogram of a string column: with more classes than it keeps, the statistics
    cannot say whether eval has a class train lacks, and the check never passes silently on that."""
    train_values, eval_values = ["a", "b", "c", "d"] * 5, ["a", "e", "e"]
    truncated = {"train": classes(_statistics(train_values, kept=2), "species"),
                 "eval": classes(_statistics(eval_values, kept=2), "species")}
    assert truncated["train"][1] == 4 and len(truncated["train"][0]) < 4 and not complete(truncated)
    label = {"column": "species", "num_classes": 5}
    assert problems(label, truncated) == []  # what the statistics alone could say: nothing
    counted = from_examples(_examples(tmp_path / "examples", {"train": train_values, "eval": eval_values}), "species")
    assert counted == {"train": ({"a": 5, "b": 5, "c": 5, "d": 5}, 4), "eval": ({"a": 1, "e": 2}, 2)}
    [found] = problems(label, counted)
    assert found.startswith("label column 'species': class 'e' (2 records) appears in the eval split but never in train")


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
