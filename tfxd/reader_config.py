"""ExampleGen's reader config (its exec property keys.READER_CONFIG_KEY): how to read the data and what to
check in it for the spec. pipeline/assembly builds it (configs.py, and dag.py places the spans for the
target); components/example_gen reads it (executor, columnar writer, span decision, driver). It crosses
from the assembly into a compiled file and back into an executor on another machine, so it is one type
with one writer (`to_json`) and one reader (`read`); a key is written only where it says something, so
the JSON, and the compiled files that hold it, are those of the dicts it replaced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from tfxd import keys


@dataclass(frozen=True)
class LabelCheck:
    """A label column whose values must be classes of its task (binary: 0/1, multiclass: 0..num_classes-1)."""

    column: str
    task: str
    num_classes: int | None = None  # multiclass only (the spec refuses a multiclass label without it)

    @property
    def classes(self) -> int:
        """How many classes the label has: 2 for binary, num_classes for multiclass."""
        return 2 if self.num_classes is None else self.num_classes

    def to_json(self) -> dict[str, Any]:
        return {"column": self.column, "task": self.task, "num_classes": self.num_classes}


@dataclass(frozen=True)
class SpanReading:
    """With spans in data.path: which spans to read and what to do when none is new. The assembly adds the
    target's view: ``path`` (the pattern as placed), ``pushed_to`` (where blessed models go, for "no new
    data"), ``drift_store`` (with validation.drift) and ``local`` (a local run reads `span: scheduled` by
    the day it started)."""

    choice: dict[str, Any] | str  # pipeline.spec.data.Data.span_choice()
    on_no_new_data: str  # train | skip | fail
    splits: dict[str, str] = field(default_factory=dict)  # file-pattern splits: split -> its pattern
    path: str | None = None
    pushed_to: str | None = None
    drift_store: str | None = None
    local: bool = False

    def placed(self) -> tuple[str, str]:
        """(path, pushed_to) as the executor reads them; ValueError for spans the assembly never placed."""
        if self.path is None or self.pushed_to is None:
            raise ValueError("the reader config's spans were not placed for a target (pipeline/assembly/dag.py "
                             "places them): compile or run the spec with tfxd")
        return self.path, self.pushed_to

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"choice": self.choice, "on_no_new_data": self.on_no_new_data,
                                "splits": self.splits}
        if self.path is not None:
            data.update(path=self.path, pushed_to=self.pushed_to)
        if self.drift_store:
            data["drift_store"] = self.drift_store
        if self.local:
            data["local"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpanReading:
        return cls(data["choice"], data["on_no_new_data"], data.get("splits") or {}, data.get("path"),
                   data.get("pushed_to"), data.get("drift_store"), bool(data.get("local")))


@dataclass(frozen=True)
class ReaderConfig:
    """``format`` and ``columns`` (pinned column types) say how to read; ``bad_records`` what to do with a
    record that does not read; ``project`` the BigQuery project. The checks in the data: ``numeric``,
    columns read as numbers (words there are bad records, not a string column); ``label``; ``needs``,
    column -> where the spec reads it, for data whose columns `tfxd validate` could not read (None: it
    could)."""

    format: str
    bad_records: str
    columns: dict[str, str] = field(default_factory=dict)
    project: str | None = None
    numeric: tuple[str, ...] = ()
    label: LabelCheck | None = None
    needs: dict[str, str] | None = None
    spans: SpanReading | None = None

    @property
    def skips_bad_records(self) -> bool:
        return self.bad_records == "skip"

    def with_spans(self, spans: SpanReading) -> ReaderConfig:
        return replace(self, spans=spans)

    def skipping_bad_records(self) -> ReaderConfig:
        return replace(self, bad_records="skip")

    def to_json(self) -> str:
        data: dict[str, Any] = {"format": self.format, "columns": self.columns, "bad_records": self.bad_records,
                                "project": self.project}
        if self.numeric:
            data["numeric"] = list(self.numeric)
        if self.label is not None:
            data["label"] = self.label.to_json()
        if self.needs is not None:
            data["needs"] = self.needs
        if self.spans is not None:
            data["spans"] = self.spans.to_json()
        return json.dumps(data, sort_keys=True)


def read(text: str) -> ReaderConfig:
    """The reader config written by ReaderConfig.to_json (the exec property's value)."""
    data = json.loads(text)
    label, spans = data.get("label"), data.get("spans")
    return ReaderConfig(
        format=data["format"], bad_records=data["bad_records"], columns=data.get("columns") or {},
        project=data.get("project"), numeric=tuple(data.get("numeric", ())),
        label=LabelCheck(label["column"], label["task"], label.get("num_classes")) if label else None,
        needs=data.get("needs"), spans=SpanReading.from_json(spans) if spans else None)


def of(exec_properties: dict[str, Any]) -> ReaderConfig:
    """The reader config among an ExampleGen's exec properties."""
    return read(exec_properties[keys.READER_CONFIG_KEY])
