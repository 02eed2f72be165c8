"""The local data a spec names, found once: its files, their size, and the columns they have (a CSV
header, a Parquet schema, read cheaply). `validate` checks the spec's column names against them; the
assembly sizes Beam and tells ExampleGen which columns it must look for itself."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass

from tfxd import expressions, spans
from tfxd.files import is_uri
from tfxd.formats import FORMATS
from tfxd.pipeline.spec.data import Data
from tfxd.pipeline.spec.document import Spec
from tfxd.pipeline.spec.errors import Path, Problems, closest


@dataclass(frozen=True)
class DataFiles:
    """``files`` None: the data is not local (BigQuery, a bucket). ``columns``: (the file read, its
    columns), None where they cannot be told cheaply (jsonl, tfrecord, remote, unreadable).
    ``span_problem``: why the spans a run would read are not there (data.path with spans), for `validate`."""

    files: list[str] | None
    columns: tuple[str, list[str]] | None
    span_problem: str | None = None

    @property
    def size(self) -> int | None:
        """The local input's bytes on disk; None for remote data."""
        return None if self.files is None else sum(os.path.getsize(f) for f in self.files)


def find(data: Data, resolve: Callable[[str], str]) -> DataFiles:
    """The files `data` names (a file, a directory's split patterns, a glob), relative paths made
    absolute by ``resolve``, and their columns."""
    if not data.path or is_uri(data.path):
        return DataFiles(None, None)
    if data.span_pattern is not None:
        try:
            files = _span_files(data, resolve)
        except spans.SpanError as exc:
            return DataFiles([], None, str(exc))
        return DataFiles(files, _columns(data.format, files))
    path = resolve(data.path)
    if os.path.isdir(path):
        patterns = list(data.patterns.values()) or ["*"]
        files = sorted(f for pattern in patterns for f in glob.glob(os.path.join(path, pattern)))
    else:
        files = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    files = [f for f in files if os.path.isfile(f) and not os.path.basename(f).startswith((".", "_"))]
    return DataFiles(files, _columns(data.format, files))


def _span_files(data: Data, resolve: Callable[[str], str]) -> list[str]:
    """The local files of the spans a run would read now (a scheduled span: the latest, as its date is
    known only when the run starts); SpanError when they are not there, or a span has no data file."""
    pattern = spans.SpanPattern.parse(resolve(data.path or ""))
    choice = data.span_choice()
    chosen = spans.select(pattern, pattern.find(glob.glob),
                          "latest" if isinstance(choice, dict) and "scheduled" in choice else choice)
    return pattern.files_of(chosen, list(data.patterns.values()), glob.glob, os.path.isdir)


def _columns(data_format: str, files: list[str]) -> tuple[str, list[str]] | None:
    read = FORMATS[data_format].columns
    names = read(files[0]) if read is not None and files else None
    return (files[0], names) if names else None


def column_uses(spec: Spec) -> list[tuple[Path, str, str]]:
    """Every place the spec reads a data column: (key path, column, what it is there)."""
    uses: list[tuple[Path, str, str]] = []
    for index, feature in enumerate(spec.features):
        if feature.expr:
            uses += [(("features", index, "expr"), column, "column") for column in expressions.columns(feature.expr)]
        else:
            uses.append((("features", index, "name"), feature.name, "feature"))
    if spec.label.expr:
        uses += [(("label", "expr"), column, "column") for column in expressions.columns(spec.label.expr)]
    elif spec.label.column:
        path = ("label", "column") if "column" in spec.label.model_fields_set else ("label", "name")
        uses.append((path, spec.label.column, "label column"))
    if spec.data.split_key:
        uses.append((("data", "split_key"), spec.data.split_key, "split key"))
    uses += [(("data", "columns", column), column, "column") for column in spec.data.columns]
    if spec.validation.drift is not None:
        uses += [(("validation", "drift", "features", column), column, "drift column")
                 for column in spec.validation.drift.features]
    for index, slice_columns in enumerate(spec.evaluation.slices):  # TFMA slices the raw examples
        uses += [(("evaluation", "slices", index, position), column, "slice column")
                 for position, column in enumerate(slice_columns)]
    return uses


def check_columns(spec: Spec, found: DataFiles, problems: Problems) -> None:
    """Every column the spec names must be in the data (where its columns are known)."""
    if found.columns is None:
        return
    source, columns = found.columns
    for path, column, what in column_uses(spec):
        if column not in columns:
            close = closest(column, columns)
            hint = f"did you mean {close!r}? " if close else ""
            problems.add(path, f"{what} {column!r} is not a column of {os.path.basename(source)}",
                         f"{hint}the data has: {', '.join(columns)}")
