"""A validation's batches kept in memory, parsed (trainer_module.data.validation): read once, and every
later validation of Keras's fit reads them from memory, under each strategy that keeps them. The judges:
the files, deleted once the batches are kept (a validation that read them again would fail), and Keras's
own evaluate over the same batches read from the files (the metrics the kept batches must give)."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from tests.trainer_module.test_strategies import run_fresh
from tfxd.trainer_module import data, planner

# an eval split of 300 tf.Examples in 2 gzipped files; a validation reads 4 batches of 100, crossing the
# split's end (as taxi's 15 of 400 cross its 2,988), under the strategy the case names, on 2 logical CPUs
SETUP = """
import json, os, shutil
from tfxd.trainer_module import data as inputs, planner, strategy

folder = os.environ["EVAL_DIR"]
os.makedirs(folder)
for part in range(2):
    with tf.io.TFRecordWriter(f"{folder}/part-{part}.gz", options="GZIP") as writer:
        for i in range(150):
            x = float((part * 150 + i) % 17) - 8.0
            feature = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[x])),
                       "c": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 5])),
                       "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(x + i % 3 > 0)]))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())

class Transformed:
    @staticmethod
    def transformed_feature_spec():
        return {"x": tf.io.FixedLenFeature([1], tf.float32), "c": tf.io.FixedLenFeature([1], tf.int64),
                "y": tf.io.FixedLenFeature([], tf.int64)}

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
devices, _ = strategy.detect_devices({})
plan = planner.plan({}, devices, strategy=os.environ["STRATEGY"], batch_size=10)
dist = strategy.build(plan)
files = [f"{folder}/part-*.gz"]
spec = {"cache": "auto", "parallel_reads": "auto", "shuffle_buffer": 0, "prefetch": "auto"}
tf.keras.utils.set_random_seed(3)
with dist.scope():
    model = models.build(SPEC, INFO, 2)

def evaluate(dataset):
    return model.evaluate(dataset, steps=4, verbose=0, return_dict=True)

def from_files(records_cache="auto"):
    return inputs.dataset(files, Transformed(), "y", plan, {**spec, "cache": records_cache}, 3, shuffle=False,
                          batch_size=100)
"""


@pytest.mark.parametrize("name", ["default", "one_device", "mirrored"])
def test_kept_batches_serve_every_validation_with_the_files_gone(tmp_path, name):
    result = run_fresh(SETUP + textwrap.dedent("""
        expected = evaluate(from_files())
        kept = inputs.validation(files, Transformed(), "y", plan, spec, 3, batch_size=100, steps=4)
        shutil.rmtree(folder)  # read once, in validation(): nothing may read the files again
        again = [evaluate(kept) for _ in range(2)]
        history = model.fit(data(plan.global_batch_size), steps_per_epoch=2, epochs=3, validation_data=kept,
                            validation_steps=4, verbose=0)
        print("RESULT", json.dumps({"strategy": plan.strategy.value, "replicas": dist.num_replicas_in_sync,
                                    "expected": expected, "again": again,
                                    "validations": len(history.history["val_loss"])}))
    """), env={"EVAL_DIR": str(tmp_path / "eval"), "STRATEGY": name})
    assert result["strategy"] == name and result["replicas"] == (2 if name == "mirrored" else 1)
    for metrics in result["again"]:  # Keras's own evaluate of the batches read from the files
        assert metrics == pytest.approx(result["expected"], rel=1e-6)
    assert result["validations"] == 3  # fit validated at each of its epochs, the files gone


def test_the_judge_bites_on_a_validation_that_reads_the_files(tmp_path):
    """The same batches not kept (the records uncached too): with the files deleted, Keras's next validation
    reads them again and fails, where the kept ones above serve it."""
    result = run_fresh(SETUP + textwrap.dedent("""
        unkept = from_files(records_cache=False)
        evaluate(unkept)
        shutil.rmtree(folder)
        try:
            evaluate(unkept)
            error = None
        except tf.errors.NotFoundError as exc:
            error = type(exc).__name__
        print("RESULT", json.dumps({"error": error}))
    """), env={"EVAL_DIR": str(tmp_path / "eval"), "STRATEGY": "default"})
    assert result == {"error": "NotFoundError"}


class _Spec:
    def __init__(self, spec: dict) -> None:
        self.spec = spec

    def transformed_feature_spec(self) -> dict:
        return self.spec


def test_what_is_kept_is_bounded_and_the_spec_and_the_strategy_can_refuse(monkeypatch):
    import tensorflow as tf

    plan = planner.plan({}, planner.Devices(), batch_size=40)
    numbers = _Spec({"x": tf.io.FixedLenFeature([3], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)})
    assert data._example_bytes(numbers.spec) == 3 * 4 + 8
    assert data._keep_validation("auto", numbers, plan, 6000) is True
    monkeypatch.setattr(data, "MEMORY_CACHE_LIMIT_BYTES", 20 * 6000 - 1)  # one byte short of 6,000 examples
    assert data._keep_validation("auto", numbers, plan, 6000) is False
    assert data._keep_validation(True, numbers, plan, 6000) is True  # training.input.cache: true
    assert data._keep_validation(False, numbers, plan, 10) is False
    words = _Spec({"w": tf.io.VarLenFeature(tf.string), "y": tf.io.FixedLenFeature([], tf.int64)})
    assert data._example_bytes(words.spec) is None and data._keep_validation("auto", words, plan, 10) is False
    for copied in (planner.Strategy.MULTI_WORKER_MIRRORED, planner.Strategy.PARAMETER_SERVER, planner.Strategy.TPU):
        assert data._keep_validation(True, numbers, dataclasses.replace(plan, strategy=copied), 10) is False
