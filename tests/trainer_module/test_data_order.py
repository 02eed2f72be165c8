"""The Trainer's input order: reproducible with training.seed, left to tf.data's fastest order without."""

from __future__ import annotations

from collections import Counter

import tfxd  # noqa: F401  (legacy Keras, before TensorFlow)

# isort: split
import tensorflow as tf

from tfxd.trainer_module import data, planner


class _Transformed:
    """The one thing the input function asks of TFTransformOutput."""

    @staticmethod
    def transformed_feature_spec() -> dict:
        return {"x": tf.io.FixedLenFeature([], tf.int64), "y": tf.io.FixedLenFeature([], tf.int64)}


def _files(folder) -> list[str]:
    for part in range(3):
        with tf.io.TFRecordWriter(str(folder / f"part-{part}.gz"), options="GZIP") as writer:
            for i in range(50):
                value = part * 1000 + i
                example = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(int64_list=tf.train.Int64List(value=[value])),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[value % 2]))}))
                writer.write(example.SerializeToString())
    return [str(folder / "part-*.gz")]


def _read(files: list[str], seed: int | None, batches: int = 15,
          parallel_reads: str | bool = "auto") -> tuple[tf.data.Dataset, list[int]]:
    plan = planner.plan({}, planner.Devices(), batch_size=10, train_files=3)
    spec = {"cache": False, "parallel_reads": parallel_reads, "shuffle_buffer": 100, "prefetch": "auto"}
    dataset = data.dataset(files, _Transformed(), "y", plan, spec, seed)
    return dataset, [int(x) for features, _ in dataset.take(batches) for x in features["x"].numpy()]


def test_a_seed_reads_the_same_order_every_time(tmp_path):
    files = _files(tmp_path)
    first, order = _read(files, seed=7)
    assert first.options().deterministic is True
    assert first.options().autotune.enabled is False  # no model thread for fit's end to wait for
    assert _read(files, seed=7)[1] == order
    assert sorted(order) == [part * 1000 + i for part in range(3) for i in range(50)]  # every record, once
    assert _read(files, seed=8)[1] != order


def test_no_seed_lets_tf_data_take_the_order_ready_first(tmp_path):
    # Without a seed the parallel parse hands out batches as they are ready, so a batch of the next
    # epoch may come before the last of this one (CI saw it once): read ten epochs of batches and
    # expect every record ten times, give or take one where batches cross the last cut.
    dataset, order = _read(_files(tmp_path), seed=None, batches=150)
    assert dataset.options().deterministic is False
    counts = Counter(order)
    assert sorted(counts) == [part * 1000 + i for part in range(3) for i in range(50)]
    assert len(order) == 1500 and all(9 <= count <= 11 for count in counts.values()), counts


def _ops(dataset: tf.data.Dataset) -> set[str]:
    """The kinds of dataset op the pipeline is built of, from the graph tf.data serializes."""
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())  # noqa: SLF001
    return {node.op for node in graph.node}


def test_local_files_are_read_in_sequence_unless_parallel_reads_is_asked(tmp_path):
    files = _files(tmp_path)
    sequential, order = _read(files, seed=7, parallel_reads="auto")
    assert "InterleaveDataset" in _ops(sequential)
    assert not any(op.startswith("ParallelInterleave") for op in _ops(sequential))
    parallel, parallel_order = _read(files, seed=7, parallel_reads=True)
    assert any(op.startswith("ParallelInterleave") for op in _ops(parallel))
    every = [part * 1000 + i for part in range(3) for i in range(50)]
    assert sorted(order) == sorted(parallel_order) == every  # every record once an epoch, either way


def test_files_on_a_remote_store_are_read_in_parallel():
    assert data._parallel_reads("auto", ["gs://bucket/Transform/Split-train/*"]) is True
    assert data._parallel_reads("auto", ["/mnt/pipeline/Transform/Split-train/*"]) is False
    assert data._parallel_reads(False, ["gs://bucket/Split-train/*"]) is False
    assert data._parallel_reads(True, ["/mnt/Split-train/*"]) is True
