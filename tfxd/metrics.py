"""Every metric a spec can name, in one table: the tasks it fits, which way is better, the values it can
take, and how Keras (the Trainer, `model.metrics`) and TFMA (the Evaluator, `evaluation.metrics`)
compute it. The spec checks names, tasks, thresholds and `max_drop` against it; trainer_module.models
and pipeline.assembly.evaluation build their metrics from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

HIGHER = "higher"  # a drop is a loss: `max_drop` bounds how far it may fall against the baseline
LOWER = "lower"  # a rise is a loss: `max_drop` bounds how far it may climb
# direction None: the metric describes the data (a count, a mean) and has no better side

TASKS = ("binary", "multiclass", "regression")
_CLASSIFICATION = frozenset({"binary", "multiclass"})
_BINARY = frozenset({"binary"})
_MULTICLASS = frozenset({"multiclass"})
_REGRESSION = frozenset({"regression"})
_ANY = frozenset(TASKS)


@dataclass(frozen=True)
class Metric:
    """``keras_class`` is the tf.keras.metrics class (TFMA takes Keras classes by name too), per task
    where that depends on it; ``config`` its arguments. ``keras_name`` is the name Keras logs it under
    when it is not the spec's own. ``tfma_class`` is TFMA's own class where Keras has none: Keras then
    reduces (``keras_class`` Sum or Mean) over ``keras_of``: a count, the labels or the predictions."""

    tasks: frozenset[str]
    direction: str | None
    low: float
    high: float
    keras_class: str | Mapping[str, str]
    config: Mapping[str, str | int] = field(default_factory=dict)
    keras_name: str | Mapping[str, str] | None = None
    tfma_class: str | None = None
    keras_of: str | None = None
    whole: bool = False  # a count: its thresholds are whole numbers

    def keras(self, name: str, task: str) -> tuple[str, str]:
        """(tf.keras.metrics class, the name it logs under) for a label of ``task``."""
        return _class_for(self.keras_class, task), _for(self.keras_name, task) or name

    def tfma(self, task: str) -> str:
        """The class TFMA's MetricConfig names for a label of ``task``."""
        return self.tfma_class or _class_for(self.keras_class, task)

    def within(self, value: float) -> bool:
        return self.low <= value <= self.high


def _for(value: str | Mapping[str, str] | None, task: str) -> str | None:
    return value.get(task) if isinstance(value, Mapping) else value


def _class_for(value: str | Mapping[str, str], task: str) -> str:
    """A metric's class for a task it serves (Metric.tasks): always one."""
    return value[task] if isinstance(value, Mapping) else value


_UNIT = (0.0, 1.0)  # accuracies, areas under curves, precision, recall
_ERROR = (0.0, math.inf)  # losses and errors
_BY_TASK_ACCURACY = {"binary": "BinaryAccuracy", "multiclass": "SparseCategoricalAccuracy"}
# Keras' AUC default, named so that TFMA uses it too: the Evaluator's AUC is then the Trainer's figure,
# computed the same way. TFMA's own default, 10,000 thresholds, builds that many confusion matrices in
# Python for every slice, for an AUC that differs in the fifth decimal (bench/RESULTS.md, Evaluator).
_AUC_THRESHOLDS = {"num_thresholds": 200}

METRICS: dict[str, Metric] = {
    "accuracy": Metric(_CLASSIFICATION, HIGHER, *_UNIT, _BY_TASK_ACCURACY,
                       keras_name={"binary": "binary_accuracy", "multiclass": "sparse_categorical_accuracy"}),
    "binary_accuracy": Metric(_BINARY, HIGHER, *_UNIT, "BinaryAccuracy"),
    # labels are class ids, so categorical accuracy is computed on them as the sparse one
    "categorical_accuracy": Metric(_MULTICLASS, HIGHER, *_UNIT, "SparseCategoricalAccuracy",
                                   keras_name="sparse_categorical_accuracy"),
    "sparse_categorical_accuracy": Metric(_MULTICLASS, HIGHER, *_UNIT, "SparseCategoricalAccuracy"),
    "sparse_top_k_categorical_accuracy": Metric(_MULTICLASS, HIGHER, *_UNIT, "SparseTopKCategoricalAccuracy"),
    "auc": Metric(_BINARY, HIGHER, *_UNIT, "AUC", _AUC_THRESHOLDS),
    "auc_pr": Metric(_BINARY, HIGHER, *_UNIT, "AUC", {**_AUC_THRESHOLDS, "curve": "PR"}),
    "precision": Metric(_BINARY, HIGHER, *_UNIT, "Precision"),
    "recall": Metric(_BINARY, HIGHER, *_UNIT, "Recall"),
    "binary_crossentropy": Metric(_BINARY, LOWER, *_ERROR, "BinaryCrossentropy"),
    "sparse_categorical_crossentropy": Metric(_MULTICLASS, LOWER, *_ERROR, "SparseCategoricalCrossentropy"),
    "mean_squared_error": Metric(_REGRESSION, LOWER, *_ERROR, "MeanSquaredError"),
    "mean_absolute_error": Metric(_REGRESSION, LOWER, *_ERROR, "MeanAbsoluteError"),
    "root_mean_squared_error": Metric(_REGRESSION, LOWER, *_ERROR, "RootMeanSquaredError"),
    "mean_absolute_percentage_error": Metric(_REGRESSION, LOWER, *_ERROR, "MeanAbsolutePercentageError"),
    "example_count": Metric(_ANY, None, 0.0, math.inf, "Sum", tfma_class="ExampleCount", keras_of="count",
                            whole=True),
    "mean_label": Metric(_ANY, None, -math.inf, math.inf, "Mean", tfma_class="MeanLabel", keras_of="label"),
    "mean_prediction": Metric(_ANY, None, -math.inf, math.inf, "Mean", tfma_class="MeanPrediction",
                              keras_of="prediction"),
}


def fitting(task: str) -> list[str]:
    """The metric names that fit a label of ``task``."""
    return [name for name, metric in METRICS.items() if task in metric.tasks]
