"""The tfxd spec (version 1): the single source of truth for keys, defaults and checks.

Each section is a pydantic model with ``extra="forbid"``; checks that involve
several keys of one section live in that section's validator and report every
problem at its exact key path (see ``pipeline.errors.Problems``). Defaults that
depend on other keys (the root, the push directory, metrics by task, the
options of each transform) are filled here too, so ``tfxd render`` shows them.
"""

from __future__ import annotations

import math
import posixpath
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from pipeline import cron, expressions
from pipeline.errors import Problems

SPEC_VERSION = 1
COMPONENTS = ("ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator",
              "Transform", "Trainer", "Evaluator", "Pusher")
Component = Literal["ExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator",
                    "Transform", "Trainer", "Evaluator", "Pusher"]
Task = Literal["binary", "multiclass", "regression"]

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,127}$"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
DOTTED = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
SPLIT_NAME = r"^[a-z][a-z0-9_]*$"
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?$"

_CLASSIFICATION = frozenset({"binary", "multiclass"})
_BINARY = frozenset({"binary"})
_MULTICLASS = frozenset({"multiclass"})
_REGRESSION = frozenset({"regression"})
_ANY = frozenset({"binary", "multiclass", "regression"})

# Metric name -> the tasks it makes sense for. Keras (model.metrics) and TFMA
# (evaluation.metrics) both take these names; the Trainer and the Evaluator map
# them to their classes.
METRICS: dict[str, frozenset[str]] = {
    "accuracy": _CLASSIFICATION,
    "binary_accuracy": _BINARY,
    "categorical_accuracy": _MULTICLASS,
    "sparse_categorical_accuracy": _MULTICLASS,
    "sparse_top_k_categorical_accuracy": _MULTICLASS,
    "auc": _BINARY,
    "auc_pr": _BINARY,
    "precision": _BINARY,
    "recall": _BINARY,
    "binary_crossentropy": _BINARY,
    "sparse_categorical_crossentropy": _MULTICLASS,
    "mean_squared_error": _REGRESSION,
    "mean_absolute_error": _REGRESSION,
    "root_mean_squared_error": _REGRESSION,
    "mean_absolute_percentage_error": _REGRESSION,
    "example_count": _ANY,
    "mean_label": _ANY,
    "mean_prediction": _ANY,
}
# Metrics where smaller is better (an allowed `max_drop` is then an allowed rise), and metrics that are
# descriptive only (no better direction, so no `max_drop`).
LOWER_IS_BETTER = frozenset({"binary_crossentropy", "sparse_categorical_crossentropy", "mean_squared_error",
                             "mean_absolute_error", "root_mean_squared_error",
                             "mean_absolute_percentage_error"})
DESCRIPTIVE = frozenset({"example_count", "mean_label", "mean_prediction"})
MetricName = Literal[tuple(METRICS)]  # type: ignore[valid-type]

OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "ftrl")
OptimizerName = Literal[OPTIMIZERS]  # type: ignore[valid-type]

TRANSFORMS = ("zscore", "minmax", "log", "bucketize", "vocabulary", "hash", "identity", "categorical")
# The options each transform takes and their defaults; None marks a required option.
TRANSFORM_OPTIONS: dict[str, dict[str, Any]] = {
    "vocabulary": {"top_k": 0, "oov_buckets": 1, "frequency_threshold": 0},
    "bucketize": {"buckets": 10},
    "hash": {"buckets": None},
    "categorical": {"num_buckets": None},
}
_ALL_OPTIONS = sorted({option for options in TRANSFORM_OPTIONS.values() for option in options})

# Which model types use which model options.
MODEL_OPTIONS: dict[str, tuple[str, ...]] = {
    "hidden_units": ("dnn", "wide_deep"),
    "dropout": ("dnn", "wide_deep", "cnn"),
    "cnn": ("cnn",),
    "builder": ("custom",),
}

ACCELERATORS = (
    "NVIDIA_TESLA_K80", "NVIDIA_TESLA_P4", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100", "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_L4", "NVIDIA_H100_80GB", "NVIDIA_H100_MEGA_80GB",
    "NVIDIA_H200_141GB", "NVIDIA_B200", "TPU_V2", "TPU_V3", "TPU_V4_POD", "TPU_V5_LITEPOD",
)

PositiveInt = Annotated[int, Field(ge=1)]


class Section(BaseModel):
    """Base of every spec model: unknown keys are errors, types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    def _explicit(self, key: str) -> bool:
        return key in self.model_fields_set


def _drop(handler: SerializerFunctionWrapHandler, model: BaseModel, keys: set[str]) -> dict[str, Any]:
    data = handler(model)
    return {key: value for key, value in data.items() if key not in keys}


# ---------------------------------------------------------------- data


class Data(Section):
    format: Literal["csv", "parquet", "tfrecord", "jsonl", "bigquery"] = Field(
        description="csv | parquet | tfrecord | jsonl | bigquery")
    path: str | None = Field(None, min_length=1, description="a file, a directory or a glob (not for bigquery)")
    query: str | None = Field(None, min_length=1, description="the SQL to read (bigquery only)")
    columns: dict[str, Literal["int", "float", "string"]] = Field(
        default_factory=dict, description="type hints per column: int | float | string")
    splits: dict[str, float | str] = Field(
        default_factory=lambda: {"train": 0.8, "eval": 0.2},
        description="ratios summing to 1 ({train: 0.8, eval: 0.2}) or file patterns under path")
    split_key: str | None = Field(None, min_length=1, description="the column hashed to pick a record's split")
    bad_records: Literal["fail", "skip"] = "fail"

    @model_validator(mode="after")
    def _check(self) -> Data:
        problems = Problems()
        if self.format == "bigquery":
            if self.query is None:
                problems.add(("query",), "bigquery reads need a query", "add `query: SELECT ... FROM ...`")
            if self.path is not None:
                problems.add(("path",), "`path` is not used with format bigquery", "remove `path`; use `query`")
        else:
            if self.path is None:
                problems.add(("path",), f"format {self.format} needs a path",
                             "add `path:` with a file, a directory or a glob")
            if self.query is not None:
                problems.add(("query",), "`query` is only for format bigquery", "remove `query`")
        self._check_splits(problems)
        problems.raise_if_any()
        return self

    def _check_splits(self, problems: Problems) -> None:
        if not self.splits:
            problems.add(("splits",), "at least one split is needed", "e.g. splits: {train: 0.8, eval: 0.2}")
            return
        for name in self.splits:
            if not re.match(SPLIT_NAME, name):
                problems.add(("splits", name), f"split name {name!r} is not allowed",
                             "use lowercase letters, digits and '_', starting with a letter")
        for needed, why in (("train", "the Trainer fits on it"),
                            ("eval", "the Trainer validates on it and the Evaluator evaluates it")):
            if needed not in self.splits:
                problems.add(("splits",), f"there is no `{needed}` split ({why})",
                             f"name one of the splits `{needed}`")
        kinds = {type(value) is str for value in self.splits.values()}
        if len(kinds) > 1:
            problems.add(("splits",), "splits mix ratios and file patterns",
                         "give every split a ratio (0.8) or every split a pattern ('train/*')")
            return
        if kinds == {True}:
            if self.format == "bigquery":
                problems.add(("splits",), "file-pattern splits do not apply to bigquery", "use ratios")
            if self.split_key is not None:
                problems.add(("split_key",), "`split_key` only applies to ratio splits",
                             "remove `split_key`, or use ratios")
            return
        for name, ratio in self.splits.items():
            if not 0 < ratio <= 1:
                problems.add(("splits", name), f"ratio {ratio} is not in (0, 1]", "use a fraction such as 0.8")
        total = sum(float(r) for r in self.splits.values())
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            problems.add(("splits",), f"split ratios sum to {total:g}, not 1",
                         "make the ratios add up to 1, e.g. {train: 0.8, eval: 0.2}")


class Validation(Section):
    schema_: str = Field("infer", alias="schema", min_length=1,
                         description="infer | path to a schema.pbtxt")
    fail_on_anomalies: bool = True

    model_config = ConfigDict(populate_by_name=True)


# ------------------------------------------------------------ features


class Feature(Section):
    name: str = Field(pattern=IDENTIFIER, description="a column name, or a new name for a derived feature "
                      "(letters, digits and '_', not starting with a digit)")
    transform: Literal["zscore", "minmax", "log", "bucketize", "vocabulary", "hash", "identity", "categorical"]
    expr: str | None = Field(None, description="derive the feature from columns, e.g. 'fare / (miles + 1)'")
    fill: float | int | str | None = Field(None, description="the value used where the input is missing")
    top_k: int | None = Field(None, ge=0, description="vocabulary: keep the k most frequent values (0: all)")
    oov_buckets: int | None = Field(None, ge=0, description="vocabulary: buckets for values outside it")
    frequency_threshold: int | None = Field(None, ge=0, description="vocabulary: drop values seen fewer times")
    buckets: int | None = Field(None, ge=2, description="bucketize: quantile buckets; hash: hash buckets")
    num_buckets: int | None = Field(None, ge=1, description="categorical: ids are in [0, num_buckets)")

    @model_validator(mode="after")
    def _check(self) -> Feature:
        problems = Problems()
        options = TRANSFORM_OPTIONS.get(self.transform, {})
        for option in _ALL_OPTIONS:
            if option in options:
                if getattr(self, option) is None:
                    if options[option] is None:
                        problems.add((option,), f"transform {self.transform} needs `{option}`",
                                     f"add `{option}: N`")
                    else:
                        setattr(self, option, options[option])
            elif getattr(self, option) is not None:
                users = [name for name, opts in TRANSFORM_OPTIONS.items() if option in opts]
                problems.add((option,), f"`{option}` does not apply to transform {self.transform}",
                             f"`{option}` belongs to transform {' / '.join(users)}; remove it or change "
                             "the transform")
        if self.expr is not None:
            _check_expression(self.expr, ("expr",), problems)
        problems.raise_if_any()
        return self

    @model_serializer(mode="wrap")
    def _render(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop(handler, self, set(_ALL_OPTIONS) - set(TRANSFORM_OPTIONS.get(self.transform, {})))


def _check_expression(text: str, path: tuple[str, ...], problems: Problems) -> None:
    try:
        expressions.parse(text)
    except expressions.ExpressionError as exc:
        problems.add(path, f"{exc.message} (at column {exc.column} of the expression)",
                     "expressions use column names, numbers, + - * / %, comparisons, and/or/not and "
                     f"the functions {', '.join(expressions.FUNCTIONS)}")


# ---------------------------------------------------------------- label


class Label(Section):
    name: str = Field(pattern=IDENTIFIER, description="the label's name in the transformed data")
    column: str | None = Field(None, min_length=1, description="the column read as label (default: name)")
    expr: str | None = Field(None, description="an expression computing the label, e.g. 'tips > fare * 0.2'")
    task: Task = Field(description="binary | multiclass | regression")
    num_classes: int | None = Field(None, ge=2, description="multiclass only: the number of classes")

    @model_validator(mode="after")
    def _check(self) -> Label:
        problems = Problems()
        if self.column is not None and self.expr is not None:
            problems.add(("expr",), "a label has either `column` or `expr`, not both", "remove one of them")
        if self.column is None and self.expr is None:
            self.column = self.name
        if self.expr is not None:
            _check_expression(self.expr, ("expr",), problems)
        if self.task == "multiclass" and self.num_classes is None:
            problems.add(("num_classes",), "multiclass labels need `num_classes`", "add `num_classes: N`")
        if self.task != "multiclass" and self.num_classes is not None:
            problems.add(("num_classes",), f"`num_classes` only applies to multiclass, not {self.task}",
                         "remove `num_classes`, or set `task: multiclass`")
        problems.raise_if_any()
        return self


# ---------------------------------------------------------------- model


class Image(Section):
    feature: str = Field(pattern=IDENTIFIER, description="the feature holding the pixels")
    shape: list[PositiveInt] = Field(min_length=3, max_length=3, description="[height, width, channels]")


class Cnn(Section):
    image: Image
    filters: list[PositiveInt] = Field(default_factory=lambda: [32, 64], min_length=1,
                                       description="filters of each Conv2D + MaxPool block")
    kernel: PositiveInt = 3
    dense: list[PositiveInt] = Field(default_factory=lambda: [64], description="dense layers after Flatten")


class Optimizer(Section):
    name: OptimizerName
    learning_rate: float | None = Field(None, gt=0, description="default: the optimizer's own")


class Model(Section):
    type: Literal["dnn", "wide_deep", "linear", "cnn", "custom"] = "dnn"
    hidden_units: list[PositiveInt] = Field(default_factory=lambda: [64, 32], min_length=1)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    cnn: Cnn | None = None
    builder: str | None = Field(None, pattern=DOTTED, description="custom: 'package.module:build_model'")
    optimizer: OptimizerName | Optimizer = "adam"
    metrics: list[MetricName] | None = Field(None, description="default: accuracy (classification), "
                                             "mean_absolute_error (regression)")

    @model_validator(mode="after")
    def _check(self) -> Model:
        problems = Problems()
        for option, types in MODEL_OPTIONS.items():
            if self.type not in types and self._explicit(option) and getattr(self, option) is not None:
                problems.add((option,), f"`{option}` does not apply to model type {self.type}",
                             f"`{option}` is for type {' / '.join(types)}; remove it")
        if self.type == "cnn" and self.cnn is None:
            problems.add(("cnn",), "model type cnn needs a `cnn` section",
                         "add cnn: {image: {feature: pixels, shape: [8, 8, 1]}}")
        if self.type == "custom" and self.builder is None:
            problems.add(("builder",), "model type custom needs `builder`",
                         "add builder: 'package.module:build_model'")
        problems.raise_if_any()
        return self

    @model_serializer(mode="wrap")
    def _render(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop(handler, self, {key for key, types in MODEL_OPTIONS.items() if self.type not in types})


# ------------------------------------------------------------- training


class EarlyStopping(Section):
    monitor: str = "val_loss"
    patience: int = Field(3, ge=0)
    min_delta: float = Field(0.0, ge=0.0)
    restore_best_weights: bool = False


class ReduceLROnPlateau(Section):
    monitor: str = "val_loss"
    factor: float = Field(0.2, gt=0.0, lt=1.0)
    patience: int = Field(2, ge=0)
    min_lr: float = Field(0.0, ge=0.0)


def _switch(value: Any) -> Any:
    """``true`` turns a callback on with its defaults, ``false`` turns it off."""
    if value is True:
        return {}
    if value is False:
        return None
    return value


class Callbacks(Section):
    early_stopping: EarlyStopping | None = Field(None, description="true, false or {monitor, patience, ...}")
    reduce_lr_on_plateau: ReduceLROnPlateau | None = Field(
        None, description="true, false or {monitor, factor, patience, ...}")
    tensorboard: bool = True
    backup_and_restore: bool = True
    terminate_on_nan: bool = True
    custom: list[Annotated[str, Field(pattern=DOTTED)]] = Field(
        default_factory=list, description="['package.module:CallbackClass', ...]")

    @field_validator("early_stopping", "reduce_lr_on_plateau", mode="before")
    @classmethod
    def _on_off(cls, value: Any) -> Any:
        return _switch(value)


class Input(Section):
    cache: bool = True
    shuffle_buffer: int = Field(10000, ge=0)
    prefetch: Literal["auto"] | Annotated[int, Field(ge=0)] = "auto"


class Training(Section):
    batch_size: PositiveInt = Field(64, description="per replica; the global batch is batch_size x replicas")
    steps: PositiveInt | None = Field(None, description="training steps (default 1000); or set epochs")
    epochs: PositiveInt | None = Field(None, description="training epochs; or set steps")
    eval_steps: PositiveInt = 150
    strategy: Literal["auto", "one_device", "mirrored", "multi_worker_mirrored", "parameter_server", "tpu",
                      "central_storage"] = "auto"
    all_reduce: Literal["auto", "nccl", "hierarchical_copy", "reduce_to_one_device", "ring"] = "auto"
    mixed_precision: Literal["auto", "off", "mixed_float16", "mixed_bfloat16"] = "auto"
    seed: int | None = Field(None, ge=0)
    callbacks: Callbacks = Field(default_factory=Callbacks)
    input: Input = Field(default_factory=Input)

    @model_validator(mode="after")
    def _check(self) -> Training:
        problems = Problems()
        if self.steps is not None and self.epochs is not None:
            problems.add(("epochs",), "set `steps` or `epochs`, not both",
                         "remove one; with --set, clear the other: --set training.steps=null")
        if self.steps is None and self.epochs is None:
            self.steps = 1000
        cross_device = {"hierarchical_copy", "reduce_to_one_device"}
        if self.strategy == "mirrored" and self.all_reduce == "ring":
            problems.add(("all_reduce",), "ring is a multi-worker collective; mirrored uses cross-device ops",
                         "use auto, nccl, hierarchical_copy or reduce_to_one_device")
        if self.strategy == "multi_worker_mirrored" and self.all_reduce in cross_device:
            problems.add(("all_reduce",), f"{self.all_reduce} applies to mirrored, not to multi-worker",
                         "use auto, nccl or ring")
        if self.strategy in {"one_device", "tpu"} and self.all_reduce != "auto":
            problems.add(("all_reduce",), f"strategy {self.strategy} does not all-reduce", "use auto")
        problems.raise_if_any()
        return self


# ----------------------------------------------------------- evaluation


class Threshold(Section):
    min: float | None = Field(None, description="the metric must be at least this")
    max: float | None = Field(None, description="the metric must be at most this")
    max_drop: float | None = Field(None, ge=0.0, description="allowed drop against the blessed baseline")

    @model_validator(mode="after")
    def _check(self) -> Threshold:
        problems = Problems()
        if self.min is None and self.max is None and self.max_drop is None:
            problems.add((), "a threshold needs `min`, `max` or `max_drop`", "e.g. {min: 0.6}")
        if self.min is not None and self.max is not None and self.min > self.max:
            problems.add(("min",), f"min {self.min} is above max {self.max}", "swap them")
        problems.raise_if_any()
        return self


class Evaluation(Section):
    metrics: list[MetricName] | None = Field(None, description="default by task: binary_accuracy and auc; "
                                             "sparse_categorical_accuracy; mean_squared_error")
    thresholds: dict[str, Threshold] = Field(default_factory=dict)
    slices: list[list[Annotated[str, Field(min_length=1)]]] = Field(
        default_factory=lambda: [[]], description="feature lists to slice by; [] is the whole data")


class Push(Section):
    to: str | None = Field(None, min_length=1, description="a directory or gs://...; default <root>/serving")


class Beam(Section):
    runner: Literal["direct", "dataflow", "flink", "spark"] = "direct"
    workers: int = Field(0, ge=0, description="direct runner: processes; 0 = auto: one in-memory process for "
                         "local input under 64 MB, else one per CPU")
    master: str | None = Field(None, min_length=1, description="flink and spark: the cluster's master, "
                               "e.g. localhost:8081 (flink) or spark://host:7077 (spark)")
    args: list[str] = Field(default_factory=list, description="extra raw Beam arguments, appended last")

    @model_validator(mode="after")
    def _check(self) -> Beam:
        problems = Problems()
        if self.runner in ("flink", "spark") and self.master is None:
            problems.add(("master",), f"runner {self.runner} needs `master`",
                         "add master: localhost:8081 (flink) or spark://host:7077 (spark)")
        if self.runner in ("direct", "dataflow") and self.master is not None:
            problems.add(("master",), f"`master` does not apply to runner {self.runner}", "remove it")
        if self.runner != "direct" and self._explicit("workers"):
            problems.add(("workers",), "`workers` only applies to the direct runner",
                         "size the cluster on its own side, or pass flags in beam.args")
        problems.raise_if_any()
        return self


# -------------------------------------------------------------- targets


class TrainerCluster(Section):
    workers: PositiveInt = 1
    parameter_servers: int = Field(0, ge=0)


class LocalTarget(Section):
    orchestrator: Literal["local", "beam"] = Field(
        "local", description="local: LocalDagRunner, one node at a time; beam: BeamDagRunner, independent "
        "branches side by side")
    trainer: TrainerCluster = Field(default_factory=TrainerCluster)


class Schedule(Section):
    cron: str = Field(description="five fields: minute hour day-of-month month day-of-week")
    timezone: str = Field("UTC", description="an IANA time zone, e.g. Europe/Berlin")
    max_concurrent_runs: PositiveInt = 1

    @model_validator(mode="after")
    def _check(self) -> Schedule:
        problems = Problems()
        if message := cron.cron_problem(self.cron):
            problems.add(("cron",), message, "e.g. '0 3 * * 1' runs at 03:00 every Monday")
        if message := cron.timezone_problem(self.timezone):
            problems.add(("timezone",), message, "use an IANA name such as UTC or Europe/Berlin")
        problems.raise_if_any()
        return self


class Resources(Section):
    cpu: float | Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?m?$")] | None = Field(
        None, description="cores, e.g. 4 or '500m'")
    memory: str | None = Field(None, pattern=QUANTITY, description="e.g. 16Gi")
    gpu: int | None = Field(None, ge=0)


class KubeflowTarget(Section):
    image: str = Field(min_length=1, description="the pipeline image, built from kubeflow/Dockerfile")
    host: str | None = Field(None, pattern=r"^https?://", description="the KFP API endpoint")
    root: str | None = Field(None, pattern=r"^[a-z][a-z0-9+.-]*://.+", description="the pipeline root on the "
                             "cluster, e.g. gs://bucket/pipelines (default: the spec's root when it is a URI)")
    resources: dict[Component, Resources] = Field(default_factory=dict)
    schedule: Schedule | None = None


class Accelerator(Section):
    type: Literal[ACCELERATORS]  # type: ignore[valid-type]
    count: PositiveInt = 1


class VertexTrainer(Section):
    workers: PositiveInt = 1
    parameter_servers: int = Field(0, ge=0)
    machine_type: str = Field("n1-standard-4", min_length=1)
    accelerator: Accelerator | None = None


class VertexTarget(Section):
    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", description="the Google Cloud project id")
    region: str = Field(pattern=r"^[a-z]+-[a-z]+[0-9]$", description="e.g. us-central1")
    image: str = Field(min_length=1, description="the pipeline image, built from kubeflow/Dockerfile")
    root: str = Field(pattern=r"^gs://[a-z0-9][a-z0-9._-]{1,220}(/.*)?$", description="gs://bucket/path")
    service_account: str | None = Field(None, pattern=r"^[^@\s]+@[^@\s]+\.iam\.gserviceaccount\.com$")
    trainer: VertexTrainer = Field(default_factory=VertexTrainer)
    schedule: Schedule | None = None


class Targets(Section):
    local: LocalTarget = Field(default_factory=LocalTarget)
    kubeflow: KubeflowTarget | None = None
    vertex: VertexTarget | None = None


TARGETS = tuple(Targets.model_fields)


# ----------------------------------------------------------------- spec


class Spec(Section):
    tfxd: Literal[1] = Field(description="the spec version")
    name: str = Field(pattern=NAME_PATTERN, description="lowercase letters, digits and '-', at most 128")
    root: str | None = Field(None, min_length=1, description="the pipeline root; default tfxd-runs/<name>")
    description: str | None = None
    data: Data
    validation: Validation = Field(default_factory=Validation)
    features: list[Feature] = Field(default_factory=list)
    preprocessing_fn: str | None = Field(None, pattern=DOTTED, description="'package.module:function', "
                                         "replaces features")
    label: Label
    model: Model = Field(default_factory=Model)
    training: Training = Field(default_factory=Training)
    evaluation: Evaluation = Field(default_factory=Evaluation)
    push: Push = Field(default_factory=Push)
    beam: Beam = Field(default_factory=Beam)
    targets: Targets = Field(default_factory=Targets)

    model_config = ConfigDict(title="tfxd pipeline spec (version 1)")

    @model_validator(mode="after")
    def _check(self) -> Spec:
        problems = Problems()
        self._fill_defaults()
        self._check_features(problems)
        task = self.label.task
        for section in ("model", "evaluation"):
            for index, metric in enumerate(getattr(self, section).metrics or []):
                if task not in METRICS[metric]:
                    fits = [name for name, tasks in METRICS.items() if task in tasks]
                    problems.add((section, "metrics", index), f"metric {metric} does not fit a {task} label",
                                 f"metrics for {task}: {', '.join(fits)}")
        if self.beam.runner == "dataflow" and self.targets.vertex is None:
            problems.add(("beam", "runner"), "the dataflow runner takes its project, region, image and temp "
                         "location from targets.vertex, which the spec does not have",
                         "add targets.vertex (project, region, image, root)")
        for metric, threshold in self.evaluation.thresholds.items():
            if metric in DESCRIPTIVE and threshold.max_drop is not None:
                problems.add(("evaluation", "thresholds", metric, "max_drop"),
                             f"{metric} describes the data and has no better direction, so it cannot drop",
                             "use min or max for it, or put max_drop on a quality metric")
            if metric not in (self.evaluation.metrics or []):
                problems.add(("evaluation", "thresholds", metric),
                             f"threshold on {metric!r}, which is not in evaluation.metrics",
                             f"add {metric} to evaluation.metrics, or use one of "
                             f"{', '.join(self.evaluation.metrics or [])}")
        problems.raise_if_any()
        return self

    def _fill_defaults(self) -> None:
        if self.root is None:
            self.root = f"tfxd-runs/{self.name}"
        if self.push.to is None:
            self.push.to = posixpath.join(self.root, "serving")
        task = self.label.task
        if self.model.metrics is None:
            self.model.metrics = ["mean_absolute_error"] if task == "regression" else ["accuracy"]
        if self.evaluation.metrics is None:
            self.evaluation.metrics = {
                "binary": ["binary_accuracy", "auc"],
                "multiclass": ["sparse_categorical_accuracy"],
                "regression": ["mean_squared_error"],
            }[task]

    def _check_features(self, problems: Problems) -> None:
        if self.preprocessing_fn and self.features:
            problems.add(("preprocessing_fn",), "`preprocessing_fn` replaces `features`; the spec has both",
                         "remove `features`, or remove `preprocessing_fn`")
        if not self.preprocessing_fn and not self.features:
            problems.add(("features",), "the spec has no features",
                         "list features (name + transform), or name your own preprocessing_fn")
        seen: dict[str, int] = {}
        for index, feature in enumerate(self.features):
            if feature.name in seen:
                problems.add(("features", index, "name"),
                             f"feature {feature.name!r} is listed twice (first at features[{seen[feature.name]}])",
                             "give each feature a unique name")
            seen.setdefault(feature.name, index)
            if feature.name == self.label.name:
                problems.add(("features", index, "name"), f"feature {feature.name!r} has the label's name",
                             "rename the feature or the label")
        image = self.model.cnn.image.feature if self.model.type == "cnn" and self.model.cnn else None
        if image and self.features and image not in seen:
            problems.add(("model", "cnn", "image", "feature"), f"no feature named {image!r}",
                         f"use one of: {', '.join(seen)}")
