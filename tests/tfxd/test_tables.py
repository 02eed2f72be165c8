"""The tables every floor reads name only what exists: each metric builds in Keras under the name the
Trainer logs and has a class TFMA knows, for every task it fits; each transform is implemented by the
generic preprocessing_fn; a threshold outside a metric's values is refused at validate."""

from __future__ import annotations

import pytest

from tests.components.transform.test_preprocessing import feature, transformed
from tests.conftest import BASE_SPEC, run_cli, write_spec
from tfxd.metrics import HIGHER, LOWER, METRICS, TASKS, fitting
from tfxd.transforms import OPTIONS, TRANSFORMS, taking


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_builds_in_keras_and_tfma_knows_it(name):
    import tensorflow as tf
    import tensorflow_model_analysis as tfma

    from tfxd.trainer_module.models import metric

    found = METRICS[name]
    assert found.tasks and found.tasks <= set(TASKS) and found.low < found.high
    assert found.direction in (HIGHER, LOWER, None)
    for task in found.tasks:
        built = metric(name, task)
        assert isinstance(built, tf.keras.metrics.Metric)
        assert built.name == found.keras(name, task)[1]
        tfma_class = found.tfma(task)
        assert hasattr(tfma.metrics, tfma_class) or hasattr(tf.keras.metrics, tfma_class), tfma_class


def test_metric_names_by_task_and_direction():
    assert set(fitting("regression")) == {"mean_squared_error", "mean_absolute_error", "root_mean_squared_error",
                                          "mean_absolute_percentage_error", "example_count", "mean_label",
                                          "mean_prediction"}
    assert METRICS["auc"].direction == HIGHER and METRICS["mean_squared_error"].direction == LOWER
    assert METRICS["example_count"].direction is None and METRICS["accuracy"].within(1.0)
    assert not METRICS["accuracy"].within(1.5) and not METRICS["binary_crossentropy"].within(-0.1)


def test_every_transform_is_implemented():
    features = [feature(name, "x", name, **{option: 4 if default is None else default
                                            for option, default in TRANSFORMS[name].options.items()})
                for name in TRANSFORMS]
    out = transformed(features)
    assert set(TRANSFORMS) <= set(out)
    assert set(OPTIONS) == {option for name in TRANSFORMS for option in TRANSFORMS[name].options}
    assert taking("buckets") == ["bucketize", "hash"]


@pytest.mark.parametrize(("threshold", "message"), [
    ("binary_accuracy: {min: 1.5}", "binary_accuracy takes values from 0 to 1, so min 1.5 is outside that: "
                                    "no model can pass it"),
    ("binary_accuracy: {max: -0.5}", "so max -0.5 is outside that: no model can pass it"),
    ("auc: {min: -1}", "auc takes values from 0 to 1, so min -1 is outside that: every model passes it"),
])
def test_a_threshold_outside_the_metrics_values_is_refused(project, threshold, message):
    spec = write_spec(project, BASE_SPEC + f"evaluation:\n  metrics: [binary_accuracy, auc]\n"
                                           f"  thresholds: {{{threshold}}}\n")
    result = run_cli("validate", str(spec))
    assert result.exit_code == 2, result.output
    assert message in result.output and "hint: give a m" in result.output
    key = threshold.split(":")[0] + "." + threshold.split("{")[1].split(":")[0]
    assert "spec.yaml:21:" in result.output and f"evaluation.thresholds.{key}: " in result.output
