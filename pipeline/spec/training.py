"""How to learn: `model` (the Keras model tfxd builds, or the user's) and `training` (batch, length,
strategy, precision, callbacks, input)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from tfxd.metrics import METRICS
from tfxd.pipeline.spec.base import DOTTED, IDENTIFIER, PositiveInt, Section, drop_keys
from tfxd.pipeline.spec.errors import Problems
from tfxd.trainer_module.planner import Strategy

if TYPE_CHECKING:  # a name built from a table at run time, which a type checker takes as the string it is
    MetricName = str
    OptimizerName = str
else:
    MetricName = Literal[tuple(METRICS)]

OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "ftrl")
if not TYPE_CHECKING:
    OptimizerName = Literal[OPTIMIZERS]

# Which model types use which model options.
MODEL_OPTIONS: dict[str, tuple[str, ...]] = {
    "hidden_units": ("dnn", "wide_deep"),
    "dropout": ("dnn", "wide_deep", "cnn"),
    "cnn": ("cnn",),
    "builder": ("custom",),
}


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
        return drop_keys(handler, self, {key for key, types in MODEL_OPTIONS.items() if self.type not in types})


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
    backup_every_steps: PositiveInt = Field(
        1000, description="backup_and_restore: also back up every this many steps within an epoch (and always at "
        "an epoch's end), so a killed training redoes at most these steps, not its epoch (training.epochs over a "
        "large split; a local run stopped mid-epoch resumes at the step it stopped at); rounded up to whole "
        "calls of the compiled step (steps_per_execution). ParameterServer backs up at epoch ends only (Keras)")
    terminate_on_nan: bool = True
    custom: list[Annotated[str, Field(pattern=DOTTED)]] = Field(
        default_factory=list, description="['package.module:CallbackClass', ...]")

    @field_validator("early_stopping", "reduce_lr_on_plateau", mode="before")
    @classmethod
    def _on_off(cls, value: Any) -> Any:
        return _switch(value)


class Input(Section):
    cache: Literal["auto"] | bool = Field(
        "auto", description="the train records in memory: auto = when their files hold at most "
                            "64 MB (compressed), so memory stays bounded; true = always; false = never. Also "
                            "each validation's batches, parsed (auto: when their features have fixed sizes and "
                            "they take at most 64 MB), under the default, one_device and mirrored strategies")
    parallel_reads: Literal["auto"] | bool = Field(
        "auto", description="read the files in parallel: auto = when they are on a remote store (a URL such as "
                            "gs://), to hide each read's latency; local files are read in sequence, faster for "
                            "small records; true for large records (images) on a local disk")
    shuffle_buffer: int = Field(10000, ge=0)
    prefetch: Literal["auto"] | Annotated[int, Field(ge=0)] = "auto"


class Training(Section):
    batch_size: PositiveInt = Field(64, description="per replica; the global batch is batch_size x replicas")
    steps: PositiveInt | None = Field(None, description="training steps (default 1000); or set epochs")
    epochs: PositiveInt | None = Field(None, description="training epochs; or set steps")
    eval_steps: PositiveInt = 150
    # strict=False: a spec names a member by its value ("mirrored"), which strict mode takes only as a member
    strategy: Strategy = Field(Strategy.AUTO, strict=False, description="auto = the planner chooses from the "
                               "hardware and the cluster found at run time; default = TensorFlow's default "
                               "strategy, one device without distribution")
    all_reduce: Literal["auto", "nccl", "hierarchical_copy", "reduce_to_one_device", "ring"] = "auto"
    mixed_precision: Literal["auto", "off", "mixed_float16", "mixed_bfloat16"] = "auto"
    steps_per_execution: Literal["auto"] | PositiveInt = Field(
        "auto", description="training steps Keras runs per call of its compiled step: each call costs Python "
        "overhead, and callbacks (and a stop) act only between calls; auto = the planner chooses (32, or 1 with "
        "custom callbacks)")
    seed: int | None = Field(None, ge=0)
    callbacks: Callbacks = Field(default_factory=Callbacks)
    input: Input = Field(default_factory=Input)
    peer_timeout: PositiveInt | None = Field(
        None, description="multi-worker: seconds a peer may go without a heartbeat before TensorFlow's coordination "
        "service declares it lost (frozen, hung, cut off) and the training fails, naming it; default: TensorFlow's "
        "own (10). Heartbeats run beside the steps: a slow step never trips it")
    warm_start: bool = Field(False, description="start from the latest blessed model's weights when it reads the "
                             "same features into the same layers (else train from scratch and say why)")

    @model_validator(mode="after")
    def _check(self) -> Training:
        problems = Problems()
        if self.steps is not None and self.epochs is not None:
            problems.add(("epochs",), "set `steps` or `epochs`, not both",
                         "remove one; with --set, clear the other: --set training.steps=null")
        if self.steps is None and self.epochs is None:
            self.steps = 1000
        cross_device = {"hierarchical_copy", "reduce_to_one_device"}
        if self.strategy is Strategy.MIRRORED and self.all_reduce == "ring":
            problems.add(("all_reduce",), "ring is a multi-worker collective; mirrored uses cross-device ops",
                         "use auto, nccl, hierarchical_copy or reduce_to_one_device")
        if self.strategy is Strategy.MULTI_WORKER_MIRRORED and self.all_reduce in cross_device:
            problems.add(("all_reduce",), f"{self.all_reduce} applies to mirrored, not to multi-worker",
                         "use auto, nccl or ring")
        if self.strategy in {Strategy.DEFAULT, Strategy.ONE_DEVICE, Strategy.TPU} and self.all_reduce != "auto":
            problems.add(("all_reduce",), f"strategy {self.strategy} does not all-reduce", "use auto")
        problems.raise_if_any()
        return self

