"""tfxd's StatisticsGen executor gives TFX's StatisticsGen's statistics for the same examples: TFX's own
executor (tfx/components/statistics_gen/executor.py, as shipped) is the judge, each run with two Beam
worker processes as a run with beam.workers 2. TFDV's histograms come from approximate quantiles, whose
sketch depends on which rows each worker sees and in which order; the files are handed out as Beam's
TFRecord source hands them out, so those come out the same too (and the judge bites when they do not)."""

from __future__ import annotations

import gzip
import math
import os

from google.protobuf import json_format
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx.components.statistics_gen import executor as tfx_statistics_gen
from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor
from tfx.types import artifact_utils, standard_artifacts

from tfxd import example_files, tfrecords
from tfxd.components.statistics_gen import executor
from tfxd.direct_runner import direct_args

SPLITS = {"train": (8, 20_000), "eval": (2, 5_000)}  # files, rows per file
COMPANIES = [f"company {n}" for n in range(30)]


def _examples(folder) -> standard_artifacts.Examples:
    """ExampleGen's examples artifact: per split, gzipped files of a lognormal float (fare), an integer
    missing in some rows (hour) and a string of 30 values (company), drawn at random (seeded)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(11)
    for split, (files, rows) in SPLITS.items():
        os.makedirs(folder / f"Split-{split}")
        for index in range(files):
            fares = rng.lognormal(size=rows).astype(np.float32).tolist()
            hours = rng.integers(-1, 24, rows).tolist()
            companies = rng.choice(COMPANIES, rows, p=np.arange(1, 31) / 465).tolist()
            records = []
            for fare, hour, company in zip(fares, hours, companies, strict=True):
                feature = {"fare": tf.train.Feature(float_list=tf.train.FloatList(value=[fare])),
                           "company": tf.train.Feature(bytes_list=tf.train.BytesList(value=[company.encode()]))}
                if hour >= 0:
                    feature["hour"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[hour]))
                records.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
            path = folder / f"Split-{split}" / f"data_tfrecord-{index:05d}-of-{files:05d}.gz"
            path.write_bytes(gzip.compress(bytes(tfrecords.frames(records))))
    examples = standard_artifacts.Examples()
    examples.uri = str(folder)
    examples.split_names = artifact_utils.encode_split_names(list(SPLITS))
    return examples


def _statistics(executor_class, examples, out) -> dict[str, dict]:
    """Per split, the statistics ``executor_class`` writes, features in name order and floats to 10
    significant digits: TFDV's means and deviations are sums whose order differs from run to run of TFX's
    own StatisticsGen (their last digits), and so does the order of the features."""
    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = str(out)
    context = BaseBeamExecutor.Context(beam_pipeline_args=direct_args("multi_processing", 2),
                                       tmp_dir=str(out / "tmp"), unique_id="1")
    executor_class(context).Do({"examples": [examples]}, {"statistics": [statistics]}, {})
    found = {}
    for split in SPLITS:
        stats = statistics_pb2.DatasetFeatureStatisticsList()
        stats.ParseFromString((out / f"Split-{split}" / tfx_statistics_gen.DEFAULT_FILE_NAME).read_bytes())
        dataset = json_format.MessageToDict(stats.datasets[0])
        dataset["features"] = sorted(dataset["features"], key=lambda feature: feature["path"]["step"])
        found[split] = _rounded(dataset)
    return found


def _rounded(value):
    if isinstance(value, float) and math.isfinite(value) and value:
        return round(value, 9 - math.floor(math.log10(abs(value))))
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def _histograms(found: dict[str, dict]) -> list:
    return [histogram for feature in found["train"]["features"] if "numStats" in feature
            for histogram in feature["numStats"]["histograms"]]


def test_the_statistics_of_tfxs_statistics_gen(tmp_path, monkeypatch):
    examples = _examples(tmp_path / "examples")
    theirs = _statistics(tfx_statistics_gen.Executor, examples, tmp_path / "theirs")
    train = {feature["path"]["step"][0]: feature for feature in theirs["train"]["features"]}
    assert theirs["train"]["numExamples"] == "160000" and theirs["eval"]["numExamples"] == "10000"
    assert sorted(train) == ["company", "fare", "hour"]
    assert len(train["company"]["stringStats"]["topValues"]) == 20  # TFDV keeps its top 20
    assert {h.get("type", "STANDARD") for h in _histograms(theirs)} == {"STANDARD", "QUANTILES"}
    ours = _statistics(executor.Executor, examples, tmp_path / "ours")
    assert ours == theirs

    # the judge bites: the files handed out in another order (the reverse of Beam's) move TFDV's
    # approximate histograms
    matched = example_files._gzipped_files
    monkeypatch.setattr(example_files, "_gzipped_files", lambda patterns: list(reversed(matched(patterns) or [])))
    moved = _statistics(executor.Executor, examples, tmp_path / "moved")
    assert moved["train"]["numExamples"] == "160000"
    assert _histograms(moved) != _histograms(theirs)
