"""The tfxd spec (version 1), the single source of truth for keys, defaults and checks: the root model
and the sections that stand alone (evaluation, push, beam), with the sections of data.py, training.py
and targets.py.

Each section is a pydantic model with ``extra="forbid"``; checks that involve several keys of one
section live in that section's validator and report every problem at its exact key path (see
``errors.Problems``); checks across sections live here. Defaults that depend on other keys (the root,
the push directory, metrics by task, the options of each transform) are filled here too, so
``tfxd render`` shows them.
"""

from __future__ import annotations

import math
import posixpath
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from tfxd.beam_engines import DEFAULT_RUNNER, ENGINES, RUNNERS
from tfxd.metrics import METRICS, fitting
from tfxd.pipeline.spec.base import DOTTED, NAME_PATTERN, Section
from tfxd.pipeline.spec.data import Data, Feature, Label, Validation
from tfxd.pipeline.spec.errors import Problems
from tfxd.pipeline.spec.targets import TARGET_MODELS, Targets
from tfxd.pipeline.spec.training import MetricName, Model, Training


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
        default_factory=lambda: [list[str]()], description="feature lists to slice by; [] is the whole data")


class Push(Section):
    to: str | None = Field(None, min_length=1, description="a directory or gs://...; default <root>/serving")


def _and(names: list[str]) -> str:
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


# The runners by what they share, as the reference says it (tfxd.beam_engines holds what each one is)
_IN_PROCESS = _and([name for name, runner in RUNNERS.items() if runner.in_process])
_ENGINES = _and(list(ENGINES))


class Beam(Section):
    runner: Literal[tuple(RUNNERS)] = DEFAULT_RUNNER  # type: ignore[valid-type]
    workers: int = Field(0, ge=0, description=f"{_IN_PROCESS}: processes, 0 = auto (one in-memory process for "
                         f"local input under 64 MB, else one per CPU); {_ENGINES}: the parallelism and the number "
                         "of Python SDK worker processes, 0 = one per CPU here, the cluster's default on a cluster")
    master: str | None = Field(None, min_length=1, description=f"{_ENGINES}: the cluster's master, e.g. "
                               + " or ".join(f"{engine.master_example} ({name})" for name, engine in ENGINES.items())
                               + "; none: an embedded engine on this machine")
    job_endpoint: str | None = Field(None, pattern=r"^[^\s:/]+:\d+$", description=f"{_ENGINES}: a Beam job "
                                     "server already running (host:port), e.g. beside Flink in Kubernetes; tfxd "
                                     "then starts none. Needed on Kubeflow")
    args: list[str] = Field(default_factory=list, description="extra raw Beam arguments, appended last")

    @property
    def needs_job_server(self) -> bool:
        """A job server's engine (flink, spark) with no job server of the user's: one is started for it
        (here) or missing (on a cluster)."""
        return self.runner in ENGINES and self.job_endpoint is None

    @model_validator(mode="after")
    def _check(self) -> Beam:
        problems = Problems()
        engine = ENGINES.get(self.runner)
        for key in ("master", "job_endpoint"):
            if engine is None and getattr(self, key) is not None:
                problems.add((key,), f"`{key}` does not apply to runner {self.runner}", "remove it")
        if self.master is not None and self.job_endpoint is not None:
            problems.add(("master",), "a running job server (`job_endpoint`) already knows its cluster's master",
                         "keep one: `master` (tfxd starts a job server here for that cluster) or `job_endpoint`")
        if engine and engine.master_scheme and self.master is not None and not self.master.startswith(
                engine.master_scheme):
            problems.add(("master",), f"{self.runner}'s master {self.master!r} is not a standalone master URL",
                         f"write {engine.master_example}, or leave `master` out for an embedded {engine.title} here")
        flag = engine.parallelism_flag if engine else None
        if engine and flag and self.master is None and self.job_endpoint is None and any(
                arg == flag or arg.startswith(f"{flag}=") for arg in self.args):
            problems.add(("args",), f"beam.args sets {flag}, and `workers` sizes the {engine.title} embedded here: "
                         "its parallelism, its task slots and its SDK worker processes",
                         f"set beam.workers: N and remove {flag} from beam.args")
        sized_by = RUNNERS[self.runner].sized_by
        if sized_by and self._explicit("workers"):
            problems.add(("workers",), f"`workers` does not size {RUNNERS[self.runner].title}",
                         f"pass {sized_by} in beam.args")
        problems.raise_if_any()
        return self

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
                if task not in METRICS[metric].tasks:
                    problems.add((section, "metrics", index), f"metric {metric} does not fit a {task} label",
                                 f"metrics for {task}: {', '.join(fitting(task))}")
        target = RUNNERS[self.beam.runner].target
        if target is not None and self.targets.section(target) is None:
            problems.add(("beam", "runner"), f"the {self.beam.runner} runner takes its project, region, image and "
                         f"temp location from targets.{target}, which the spec does not have",
                         f"add targets.{target} ({TARGET_MODELS[target].NEEDS})")
        if self.validation.drift is not None and self.data.span_pattern is None:
            problems.add(("validation", "drift"), "the drift gate compares each span of the data with the "
                         "previous one, and data.path has no spans",
                         "put {YYYY}-{MM}-{DD} or {SPAN} in data.path (see docs/retraining.md), "
                         "or remove validation.drift")
        for metric, threshold in self.evaluation.thresholds.items():
            _check_threshold(metric, threshold, problems)
            if metric not in (self.evaluation.metrics or []):
                problems.add(("evaluation", "thresholds", metric),
                             f"threshold on {metric!r}, which is not in evaluation.metrics",
                             f"add {metric} to evaluation.metrics, or use one of "
                             f"{', '.join(self.evaluation.metrics or [])}")
        problems.raise_if_any()
        return self

    def read_paths(self) -> dict[tuple[str, ...], str | None]:
        """The paths a pipeline reads, by their keys: its data and a schema it is given."""
        return {("data", "path"): self.data.path, ("validation", "schema"): self.validation.schema_}

    def paths(self) -> dict[tuple[str, ...], str | None]:
        """Every path the spec names, by its key: what a pipeline reads and where it writes."""
        written: dict[tuple[str, ...], str | None] = {("root",): self.root, ("push", "to"): self.push.to}
        if self.targets.kubeflow is not None:
            written["targets", "kubeflow", "root"] = self.targets.kubeflow.root
        return {**self.read_paths(), **written}

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



def _check_threshold(metric: str, threshold: Threshold, problems: Problems) -> None:
    """A threshold no model can pass, or one that every model passes, is a mistake in the spec."""
    found = METRICS.get(metric)
    if found is None:
        return  # not an evaluated metric: reported by the caller
    path = ("evaluation", "thresholds", metric)
    if found.direction is None and threshold.max_drop is not None:
        problems.add((*path, "max_drop"), f"{metric} describes the data and has no better direction, so it "
                     "cannot drop", "use min or max for it, or put max_drop on a quality metric")
    span = found.high - found.low
    if found.direction is not None and threshold.max_drop is not None and threshold.max_drop >= span:
        problems.add((*path, "max_drop"), f"{metric} takes values from {found.low:g} to {found.high:g}, so a "
                     f"max_drop of {threshold.max_drop:g} lets every model pass", f"give a max_drop below {span:g}, "
                     "e.g. 0.01")
    for bound in ("min", "max"):
        value = getattr(threshold, bound)
        if value is not None and not found.within(value):
            above = value > found.high
            outcome = "no model can pass it" if above == (bound == "min") else "every model passes it"
            problems.add((*path, bound), f"{metric} takes values from {found.low:g} to {found.high:g}, so "
                         f"{bound} {value:g} is outside that: {outcome}",
                         f"give a {bound} between {found.low:g} and {found.high:g}")
        elif value is not None and found.whole and value != int(value):
            problems.add((*path, bound), f"{metric} is a count, so {bound} {value:g} is not a whole number",
                         f"use {math.ceil(value) if bound == 'min' else math.floor(value)}")
