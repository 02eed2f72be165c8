"""`tfxd run SPEC --to Trainer` on the taxi data, end to end: what Transform produced, the trained and
exported model, caching, and the same Trainer as two localhost workers."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO

EXTRA_FEATURES = """
  - {name: fare_per_mile, expr: "fare / (trip_miles + 1)", transform: identity, fill: 0.0}
  - {name: company_hash, expr: company, transform: hash, buckets: 16}
  - {name: log_miles, expr: trip_miles, transform: log}
  - {name: seconds_minmax, expr: trip_seconds, transform: minmax}
"""


RUN_ARGS = ("--to", "Trainer", "--set", "beam.workers=1", "--set", "training.steps=100", "--set",
            "training.eval_steps=20")


def tfxd(*args: str, cwd) -> subprocess.CompletedProcess:
    tfxd_bin = os.path.join(os.path.dirname(sys.executable), "tfxd")
    return subprocess.run([tfxd_bin, *args], capture_output=True, text=True, cwd=cwd, timeout=900)


@pytest.fixture(scope="module")
def taxi_run(tmp_path_factory):
    """One run of the taxi spec (plus derived features) up to Trainer, in-memory Beam, a short training."""
    folder = tmp_path_factory.mktemp("taxi")
    text = (REPO / "examples" / "taxi.yaml").read_text()
    text = text.replace("\nlabel:", EXTRA_FEATURES + "\nlabel:")
    (folder / "taxi.yaml").write_text(text)
    os.symlink(REPO / "examples" / "data", folder / "data")
    result = tfxd("run", "taxi.yaml", *RUN_ARGS, cwd=folder)
    return folder, result


def _records(pattern: str):
    import tensorflow as tf

    files = glob.glob(pattern)
    assert files, pattern
    return [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _column(examples, name, kind):
    values = []
    for example in examples:
        feature = example.features.feature.get(name)
        items = list(getattr(feature, kind).value) if feature is not None else []
        values.append(items[0] if items else np.nan)
    return np.array(values, dtype=object if kind == "bytes_list" else float)


def _newest(folder, component, output):
    paths = sorted(glob.glob(str(folder / "tfxd-runs" / "taxi-tips" / "pipeline" / component / output / "*")),
                   key=lambda p: int(os.path.basename(p)))
    return paths[-1]


def test_run_finishes_with_a_summary(taxi_run):
    folder, result = taxi_run
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform", "Trainer"):
        assert f"ok {name} (" in result.stdout
    assert "Trainer epoch 10/10" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    summaries = glob.glob(str(folder / "tfxd-runs" / "taxi-tips" / "runs" / "*" / "summary.json"))
    assert len(summaries) == 1
    summary = json.loads(Path(summaries[0]).read_text())
    assert summary["pipeline"] == "taxi-tips"
    assert [c["name"] for c in summary["components"]] == [
        "ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "Transform", "Trainer"]
    assert {c["status"] for c in summary["components"]} == {"ran"}
    assert sum(summary["examples"]["splits"].values()) == 15002
    assert os.path.isfile(os.path.join(os.path.dirname(summaries[0]), "logs", "run.log"))
    assert summary["strategy"]["strategy"] == "default" and summary["strategy"]["replicas"] == 1
    assert summary["strategy"]["global_batch_size"] == 40
    assert summary["metrics"]["val_binary_accuracy"] > 0.6


@pytest.fixture(scope="module")
def transformed(taxi_run):
    folder, result = taxi_run
    assert result.returncode == 0, result.stdout + result.stderr
    raw = _records(os.path.join(_newest(folder, "ExampleGen", "examples"), "Split-train", "*"))
    out = _records(os.path.join(_newest(folder, "Transform", "transformed_examples"), "Split-train", "*"))
    graph = _newest(folder, "Transform", "transform_graph")
    return raw, out, graph


def test_zscore_has_mean_0_and_variance_1_on_train(transformed):
    _, out, _ = transformed
    for name in ("fare", "trip_miles", "trip_seconds"):
        values = _column(out, name, "float_list")
        assert not np.isnan(values).any()
        assert abs(values.mean()) < 0.02, name
        assert abs(values.var() - 1) < 0.05, name


def test_expression_feature_equals_numpy(transformed):
    raw, out, _ = transformed
    fare, miles = _column(raw, "fare", "float_list"), _column(raw, "trip_miles", "float_list")
    expected = np.nan_to_num(fare / (miles + 1), nan=0.0)  # fill: 0.0 where an input was missing
    np.testing.assert_allclose(np.sort(_column(out, "fare_per_mile", "float_list")), np.sort(expected),
                               rtol=1e-5, atol=1e-6)


def test_label_matches_pandas(transformed):
    import pandas as pd

    raw, out, _ = transformed
    frame = pd.DataFrame({"tips": _column(raw, "tips", "float_list"), "fare": _column(raw, "fare", "float_list")})
    expected = (frame["tips"] > frame["fare"] * 0.2).sum()
    assert _column(out, "big_tipper", "int64_list").sum() == expected
    assert len(out) == len(raw)


def test_vocabulary_holds_the_top_tokens(transformed):
    raw, _, graph = transformed
    from collections import Counter

    companies = Counter(v for v in _column(raw, "company", "bytes_list") if isinstance(v, bytes))
    with open(os.path.join(graph, "transform_fn", "assets", "company")) as handle:
        vocabulary = [line.rstrip("\n") for line in handle]
    top = [name.decode() for name, _ in companies.most_common(5)]
    assert vocabulary[:5] == top


def test_buckets_are_quantiles(transformed):
    raw, out, _ = transformed
    ids = _column(out, "pickup_latitude", "int64_list")
    assert set(np.unique(ids)) <= set(range(10))
    present = ~np.isnan(_column(raw, "pickup_latitude", "float_list"))
    counts = np.bincount(ids[present].astype(int), minlength=10)
    assert counts.min() > 0.5 * counts.mean()  # quantile buckets are roughly equally full


def test_other_transforms_are_in_range(transformed):
    _, out, _ = transformed
    hashed = _column(out, "company_hash", "int64_list")
    assert hashed.min() >= 0 and hashed.max() < 16
    minmax = _column(out, "seconds_minmax", "float_list")
    assert minmax.min() >= 0 and minmax.max() <= 1
    assert _column(out, "log_miles", "float_list").min() >= 0
    hours = _column(out, "trip_start_hour", "int64_list")
    assert hours.min() >= 0 and hours.max() < 24


def test_feature_info_for_the_trainer(transformed):
    _, _, graph = transformed
    info = json.loads(Path(graph, "tfxd_features.json").read_text())
    features = info["features"]
    assert features["fare"] == {"kind": "float", "shape": [], "cardinality": None}
    assert features["pickup_latitude"]["cardinality"] == 10
    assert features["company"]["kind"] == "id"
    with open(os.path.join(graph, "transform_fn", "assets", "company")) as handle:
        assert features["company"]["cardinality"] == sum(1 for _ in handle) + 10
    assert info["label"] == {"name": "big_tipper", "task": "binary", "num_classes": None}


def test_second_run_is_cached(taxi_run):
    folder, _ = taxi_run
    result = tfxd("run", "taxi.yaml", *RUN_ARGS, cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    summaries = sorted(glob.glob(str(folder / "tfxd-runs" / "taxi-tips" / "runs" / "*" / "summary.json")))
    statuses = {c["name"]: c["status"] for c in json.loads(Path(summaries[-1]).read_text())["components"]}
    assert set(statuses.values()) == {"cached"}, statuses


def test_serving_signature_takes_raw_examples(transformed, taxi_run):
    import tensorflow as tf

    folder, _ = taxi_run
    raw, _, _ = transformed
    model = tf.saved_model.load(os.path.join(_newest(folder, "Trainer", "model"), "Format-Serving"))
    serialized = tf.constant([example.SerializeToString() for example in raw[:64]])
    served = model.signatures["serving_default"](examples=serialized)["outputs"].numpy()
    features = model.signatures["transform_features"](examples=serialized)
    features.pop("big_tipper")
    direct = model({name: tf.reshape(value, [-1, 1]) for name, value in features.items()}).numpy()
    assert served.shape == (64, 1)
    np.testing.assert_allclose(served, direct, rtol=1e-5)
    assert ((served >= 0) & (served <= 1)).all()
    without_label = []
    for example in raw[:8]:
        copy = type(example)()
        copy.CopyFrom(example)
        del copy.features.feature["tips"]  # a serving request has no label column
        without_label.append(copy.SerializeToString())
    np.testing.assert_allclose(model.signatures["serving_default"](examples=tf.constant(without_label))[
        "outputs"].numpy(), served[:8], rtol=1e-5)


def test_two_local_workers_train_with_multi_worker_mirrored(taxi_run):
    folder, _ = taxi_run
    result = tfxd("run", "taxi.yaml", *RUN_ARGS, "--set", "targets.local.trainer.workers=2", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    summaries = sorted(glob.glob(str(folder / "tfxd-runs" / "taxi-tips" / "runs" / "*" / "summary.json")))
    summary = json.loads(Path(summaries[-1]).read_text())
    statuses = {c["name"]: c["status"] for c in summary["components"]}
    assert statuses.pop("Trainer") == "ran" and set(statuses.values()) == {"cached"}
    assert summary["strategy"]["strategy"] == "multi_worker_mirrored"
    assert summary["strategy"]["replicas"] == 2 and summary["strategy"]["global_batch_size"] == 80
    logs = sorted(glob.glob(os.path.join(os.path.dirname(summaries[-1]), "logs", "trainer-worker-*.log")))
    assert len(logs) == 2
    lines = [next(line for line in Path(log).read_text().splitlines() if "tfxd trainer:" in line) for log in logs]
    assert all("strategy=multi_worker_mirrored replicas=2" in line for line in lines)
    assert "is_chief=True" in lines[0] and "is_chief=False" in lines[1]
    checksums = {line.split("weights_checksum=")[1] for line in lines}
    assert len(checksums) == 1  # both replicas end with identical weights
    assert os.path.isdir(os.path.join(_newest(folder, "Trainer", "model"), "Format-Serving"))


def test_local_parameter_server_cluster(taxi_run):
    folder, _ = taxi_run
    result = tfxd("run", "taxi.yaml", "--to", "Trainer", "--set", "beam.workers=1", "--set", "training.steps=20",
                  "--set", "training.eval_steps=5", "--set", "targets.local.trainer.workers=2",
                  "--set", "targets.local.trainer.parameter_servers=1", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    summaries = sorted(glob.glob(str(folder / "tfxd-runs" / "taxi-tips" / "runs" / "*" / "summary.json")))
    summary = json.loads(Path(summaries[-1]).read_text())
    assert summary["strategy"]["strategy"] == "parameter_server" and summary["strategy"]["replicas"] == 2
    logs = {os.path.basename(p) for p in glob.glob(os.path.join(os.path.dirname(summaries[-1]), "logs", "trainer-*"))}
    assert logs == {"trainer-chief-0.log", "trainer-worker-0.log", "trainer-worker-1.log", "trainer-ps-0.log"}
    assert "TerminateOnNaN is a batch-level callback" in Path(os.path.dirname(summaries[-1]), "logs",
                                                              "trainer-chief-0.log").read_text()
