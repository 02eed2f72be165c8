"""The data in: `data` (tfxd's ExampleGen), `validation`, `features` (the declarative Transform) and
`label`."""

from __future__ import annotations

import datetime
import math
import re
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from typing_extensions import TypeIs

from tfxd import spans as span_patterns
from tfxd.formats import FORMATS
from tfxd.metrics import TASKS
from tfxd.pipeline.spec.base import IDENTIFIER, SPLIT_NAME, Section, check_expression, drop_keys
from tfxd.pipeline.spec.errors import Problems
from tfxd.transforms import OPTIONS, TRANSFORMS, taking

Task = Literal[TASKS]  # type: ignore[valid-type]
# the formats read from a query (data.query) rather than from files (tfxd.formats)
_QUERIED = " or ".join(name for name, data_format in FORMATS.items() if not data_format.files)


class Spans(Section):
    """Which spans of a path with {SPAN} or {YYYY}{MM}{DD} a run reads, other than the latest."""

    window: int | None = Field(None, ge=1, description="read the N newest spans together")
    span: str | int | datetime.date | None = Field(
        None, description="one span: a date (2026-11-23) or a number (42), or `scheduled`: the run's "
        "scheduled time (plus offset_days)")
    offset_days: int | None = Field(None, description="with span: scheduled, days added to the scheduled "
                                    "date (-1: the day before)")
    unscheduled: Literal[span_patterns.UNSCHEDULED] | None = Field(  # type: ignore[valid-type]
        None, description="with span: scheduled, a run the engine gives no schedule time (started by hand, or on "
        "Kubeflow Pipelines before 2.17): fail (the default) | creation_time (the day the run was created)")

    @model_validator(mode="after")
    def _check(self) -> Spans:
        problems = Problems()
        if (self.window is None) == (self.span is None):
            problems.add((), "data.spans takes `window: N` or `span: VALUE`, one of them",
                         "e.g. spans: {window: 7}, spans: {span: 2026-11-23} or spans: {span: scheduled}")
        if isinstance(self.span, datetime.date):
            self.span = self.span.isoformat()
        for key in ("offset_days", "unscheduled"):
            if getattr(self, key) is not None and self.span != span_patterns.SCHEDULED:
                problems.add((key,), f"`{key}` applies to `span: scheduled` only",
                             f"remove `{key}`, or set `span: scheduled`")
        if self.span == span_patterns.SCHEDULED and self.unscheduled is None:
            self.unscheduled = "fail"
        problems.raise_if_any()
        return self

    def choice(self, pattern: span_patterns.SpanPattern) -> dict[str, Any]:
        """As the ExampleGen executor takes it: {"window": N}, {"span": N} or {"scheduled": offset,
        "unscheduled": fail | creation_time}."""
        if self.window is not None:
            return {"window": self.window}
        if self.span == span_patterns.SCHEDULED:
            return {"scheduled": self.offset_days or 0, "unscheduled": self.unscheduled or "fail"}
        return {"span": pattern.span_of(self.span)}  # type: ignore[arg-type]


class Data(Section):
    format: Literal[tuple(FORMATS)] = Field(description=" | ".join(FORMATS))  # type: ignore[valid-type]
    path: str | None = Field(None, min_length=1, description=f"a file, a directory or a glob (not for {_QUERIED})")
    query: str | None = Field(None, min_length=1, description=f"the SQL to read ({_QUERIED} only)")
    columns: dict[str, Literal["int", "float", "string"]] = Field(
        default_factory=dict, description="type hints per column: int | float | string")
    splits: dict[str, float | str] = Field(
        default_factory=lambda: dict[str, float | str](train=0.8, eval=0.2),
        description="ratios summing to 1 ({train: 0.8, eval: 0.2}) or file patterns under path")
    split_key: str | None = Field(None, min_length=1, description="the column hashed to pick a record's split")
    bad_records: Literal["fail", "skip"] = "fail"
    spans: Literal["latest"] | Spans = Field(
        "latest", description="with {SPAN} or {YYYY}{MM}{DD} in path: latest | {window: N} | {span: VALUE}")
    on_no_new_data: Literal["skip", "fail", "train"] = Field(
        "skip", description="when the spans to read are the ones the latest blessed model was trained on")

    @property
    def span_pattern(self) -> span_patterns.SpanPattern | None:
        """The spans in `path` (None: a path without placeholders; an invalid one never validates)."""
        if not self.path or not span_patterns.has_placeholders(self.path):
            return None
        return span_patterns.SpanPattern.parse(self.path)

    def span_choice(self) -> dict[str, Any] | str:
        """`spans` as the ExampleGen executor takes it: "latest", {"window": N}, {"span": N}, {"scheduled": d}."""
        pattern = self.span_pattern
        return "latest" if self.spans == "latest" or pattern is None else self.spans.choice(pattern)

    @property
    def ratios(self) -> dict[str, float]:
        """{split: ratio} when the splits are ratios (a record's hash picks its split), else {}."""
        return {name: value for name, value in self.splits.items() if not _is_pattern(value)}

    @property
    def patterns(self) -> dict[str, str]:
        """{split: file pattern under `path`} when the splits are file patterns, else {}."""
        return {name: value for name, value in self.splits.items() if _is_pattern(value)}

    @model_validator(mode="after")
    def _check(self) -> Data:
        problems = Problems()
        if not FORMATS[self.format].files:
            if self.query is None:
                problems.add(("query",), f"{self.format} reads need a query", "add `query: SELECT ... FROM ...`")
            if self.path is not None:
                problems.add(("path",), f"`path` is not used with format {self.format}", "remove `path`; use `query`")
        else:
            if self.path is None:
                problems.add(("path",), f"format {self.format} needs a path",
                             "add `path:` with a file, a directory or a glob")
            if self.query is not None:
                problems.add(("query",), f"`query` is only for format {_QUERIED}", "remove `query`")
        self._check_splits(problems)
        self._check_spans(problems)
        problems.raise_if_any()
        return self

    def _check_spans(self, problems: Problems) -> None:
        pattern = None
        if self.path and span_patterns.has_placeholders(self.path):
            try:
                pattern = span_patterns.SpanPattern.parse(self.path)
            except span_patterns.SpanError as exc:
                problems.add(("path",), str(exc), span_patterns.HINT)
                return
        if pattern is not None and self.path and self.patterns and pattern.rest:
            problems.add(("path",), f"with file-pattern splits, data.path ends at the span's folder, and "
                         f"{self.path} goes on past it ({pattern.rest!r})",
                         f"use path: {self.path[: len(self.path) - len(pattern.rest)].rstrip('/')} and put "
                         f"{pattern.rest!r} into each split's pattern")
            return
        if self.spans == "latest":
            return
        if pattern is None:
            problems.add(("spans",), "data.spans needs spans in the path, and it has none",
                         "put {SPAN} or {YYYY}-{MM}-{DD} in data.path where the span's folder or file name "
                         "varies (e.g. data/{YYYY}-{MM}-{DD}/*.csv), or remove data.spans")
            return
        if self.spans.span == span_patterns.SCHEDULED and not pattern.dated:
            problems.add(("spans", "span"), "`span: scheduled` reads the scheduled date, and the path has "
                         "{SPAN}, not a date", "use {YYYY}{MM}{DD} in data.path, or give the span number")
            return
        if self.spans.span is not None and self.spans.span != span_patterns.SCHEDULED:
            try:
                pattern.span_of(self.spans.span)
            except span_patterns.SpanError as exc:
                problems.add(("spans", "span"), str(exc), "give the span as it reads in the path")

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
        if self.ratios and self.patterns:
            problems.add(("splits",), "splits mix ratios and file patterns",
                         "give every split a ratio (0.8) or every split a pattern ('train/*')")
            return
        if self.patterns:
            if not FORMATS[self.format].files:
                problems.add(("splits",), f"file-pattern splits do not apply to {self.format}", "use ratios")
            if self.split_key is not None:
                problems.add(("split_key",), "`split_key` only applies to ratio splits",
                             "remove `split_key`, or use ratios")
            return
        for name, ratio in self.ratios.items():
            if not 0 < ratio <= 1:
                problems.add(("splits", name), f"ratio {ratio} is not in (0, 1]", "use a fraction such as 0.8")
        total = sum(self.ratios.values())
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            problems.add(("splits",), f"split ratios sum to {total:g}, not 1",
                         "make the ratios add up to 1, e.g. {train: 0.8, eval: 0.2}")


class _DistanceGate(Section):
    """A gate on TFDV's distance between two sets of statistics (L-infinity for string columns,
    Jensen-Shannon divergence for numbers), per column the pipeline reads."""

    threshold: float = Field(0.1, gt=0, le=1, description="the largest distance allowed, for every column")
    features: dict[str, float] = Field(default_factory=dict,
                                       description="per-column thresholds, e.g. {fare: 0.05}; others: threshold")
    action: Literal["fail", "warn"] = Field("fail", description="fail: stop before training; warn: log and go on")

    @model_validator(mode="after")
    def _check(self) -> _DistanceGate:
        problems = Problems()
        for name, value in self.features.items():
            if not 0 < value <= 1:
                problems.add(("features", name), f"threshold {value} is not in (0, 1]",
                             "a distance between distributions lies in [0, 1]; e.g. 0.05")
        problems.raise_if_any()
        return self


class Drift(_DistanceGate):
    """The gate between spans: this run's train statistics against the previous span's."""


class Skew(_DistanceGate):
    """The gate between the splits: the train statistics against the eval split's (TFDV's skew comparator,
    which TFX's own validator leaves unset)."""


class Validation(Section):
    schema_: str = Field("infer", alias="schema", min_length=1,
                         description="infer | path to a schema.pbtxt")
    fail_on_anomalies: bool = True
    drift: Drift | None = Field(None, description="compare each span with the previous one (needs spans in "
                                "data.path): {threshold: 0.1, features: {fare: 0.05}, action: fail}")
    skew: Skew | None = Field(None, description="compare the train split with the eval split: "
                              "{threshold: 0.1, features: {fare: 0.05}, action: fail}")

    model_config = ConfigDict(populate_by_name=True)


class Feature(Section):
    name: str = Field(pattern=IDENTIFIER, description="a column name, or a new name for a derived feature "
                      "(letters, digits and '_', not starting with a digit)")
    transform: Literal[tuple(TRANSFORMS)]  # type: ignore[valid-type]
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
        options = TRANSFORMS[self.transform].options
        for option in OPTIONS:
            if option in options:
                if getattr(self, option) is None:
                    if options[option] is None:
                        problems.add((option,), f"transform {self.transform} needs `{option}`",
                                     f"add `{option}: N`")
                    else:
                        setattr(self, option, options[option])
            elif getattr(self, option) is not None:
                problems.add((option,), f"`{option}` does not apply to transform {self.transform}",
                             f"`{option}` belongs to transform {' / '.join(taking(option))}; remove it or change "
                             "the transform")
        if self.expr is not None:
            check_expression(self.expr, ("expr",), problems)
        problems.raise_if_any()
        return self

    @model_serializer(mode="wrap")
    def _render(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return drop_keys(handler, self, set(OPTIONS) - set(TRANSFORMS[self.transform].options))


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
            check_expression(self.expr, ("expr",), problems)
        if self.task == "multiclass" and self.num_classes is None:
            problems.add(("num_classes",), "multiclass labels need `num_classes`", "add `num_classes: N`")
        if self.task != "multiclass" and self.num_classes is not None:
            problems.add(("num_classes",), f"`num_classes` only applies to multiclass, not {self.task}",
                         "remove `num_classes`, or set `task: multiclass`")
        problems.raise_if_any()
        return self



def _is_pattern(split: float | str) -> TypeIs[str]:
    """A split given as text is a file pattern; as a number, a ratio. Decided here only."""
    return isinstance(split, str)
