"""The evaluation section -> TFMA's EvalConfig, read back by TFMA's own spec functions: the metrics it
instantiates, the thresholds it checks, the slices it computes."""

from __future__ import annotations

from tests.conftest import BASE_SPEC, write_spec
from tfxd.pipeline.assembly.evaluation import eval_config
from tfxd.pipeline.spec.load import load_spec

EVALUATION = """\
evaluation:
  metrics: [binary_accuracy, auc, auc_pr, binary_crossentropy]
  thresholds:
    binary_accuracy: {min: 0.6, max_drop: 0.0}
    binary_crossentropy: {max: 0.7, max_drop: 0.05}
  slices: [[], [city]]
"""


def _config(project):
    return eval_config(load_spec(str(write_spec(project, BASE_SPEC + EVALUATION))).spec)


def test_tfma_computes_the_auc_the_trainer_logs(project):
    """TFMA's AUC and Keras' (the Trainer's) use the same thresholds, so the two figures agree."""
    from tensorflow_model_analysis.metrics import metric_specs

    from tfxd.trainer_module.models import metric

    config = _config(project)
    tfma_instances = {instance.name: instance for _, _, instance
                      in metric_specs.keys_and_metrics_from_specs(config, config.metrics_specs)}
    assert sorted(tfma_instances) == ["auc", "auc_pr", "binary_accuracy", "binary_crossentropy", "example_count"]
    for name in ("auc", "auc_pr"):
        keras = metric(name, "binary")
        assert tfma_instances[name].get_config()["num_thresholds"] == keras.num_thresholds == 200
    assert tfma_instances["auc_pr"].get_config()["curve"] == "PR" and keras.curve.name == "PR"


def test_thresholds_and_slices_as_tfma_reads_them(project):
    import tensorflow_model_analysis as tfma
    from tensorflow_model_analysis.metrics import metric_specs

    config = _config(project)
    thresholds = {}  # a metric's value and change thresholds come under two keys (the change's is a diff)
    for key, found in metric_specs.metric_thresholds_from_metrics_specs(config.metrics_specs, config).items():
        thresholds.setdefault(key.name, []).extend(threshold for _, threshold in found)
    accuracy = {type(t).__name__: t for t in thresholds["binary_accuracy"]}
    assert accuracy["GenericValueThreshold"].lower_bound.value == 0.6
    change = accuracy["GenericChangeThreshold"]
    # a max_drop of 0 is "not worse than the baseline": TFMA compares strictly, so a hair below 0
    assert change.direction == tfma.MetricDirection.HIGHER_IS_BETTER and -1e-9 < change.absolute.value < 0
    loss = {type(t).__name__: t for t in thresholds["binary_crossentropy"]}
    assert loss["GenericValueThreshold"].upper_bound.value == 0.7
    assert loss["GenericChangeThreshold"].direction == tfma.MetricDirection.LOWER_IS_BETTER
    assert loss["GenericChangeThreshold"].absolute.value == 0.05
    assert [list(s.feature_keys) for s in config.slicing_specs] == [[], ["city"]]
    assert not config.options.include_default_metrics.value
    (model,) = config.model_specs
    assert (model.label_key, model.preprocessing_function_names) == ("y", ["transform_features"])
