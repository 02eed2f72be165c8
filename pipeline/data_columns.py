"""The columns a local data file has, read cheaply (a CSV header, a Parquet schema), so that `validate`
can check the spec's column names before any pipeline runs."""

from __future__ import annotations

import csv
import glob
import os
from typing import TYPE_CHECKING

from pipeline import expressions
from pipeline.errors import Problems

if TYPE_CHECKING:
    from pipeline.load import LoadedSpec
    from pipeline.spec import Spec


def local_files(loaded: LoadedSpec) -> list[str] | None:
    """The local files `data` names (a file, a directory's split patterns, a glob); None for remote data."""
    data = loaded.spec.data
    if not data.path or "://" in data.path:
        return None
    path = loaded.resolve(data.path)
    if os.path.isdir(path):
        patterns = [str(p) for p in data.splits.values() if isinstance(p, str)] or ["*"]
        files = sorted(f for pattern in patterns for f in glob.glob(os.path.join(path, pattern)))
    else:
        files = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    return [f for f in files if os.path.isfile(f) and not os.path.basename(f).startswith((".", "_"))]


def input_bytes(loaded: LoadedSpec) -> int | None:
    """The size of the local input on disk; None for remote data (BigQuery, URIs)."""
    files = local_files(loaded)
    return None if files is None else sum(os.path.getsize(f) for f in files)


def known_columns(loaded: LoadedSpec) -> tuple[str, list[str]] | None:
    """(the file read, its columns) for local csv and parquet data; None where it cannot be told cheaply."""
    if loaded.spec.data.format not in ("csv", "parquet"):
        return None
    files = local_files(loaded)
    if not files:
        return None
    data = loaded.spec.data
    first = files[0]
    try:
        if data.format == "csv":
            with open(first, newline="", encoding="utf-8", errors="replace") as handle:
                header = next(csv.reader(handle), None)
            return (first, [name.strip() for name in header]) if header else None
        import pyarrow.parquet as pq

        return first, list(pq.read_schema(first).names)
    except (OSError, ValueError, csv.Error):
        return None


def column_uses(spec: Spec) -> list[tuple[tuple, str, str]]:
    """Every place the spec reads a data column: (key path, column, what it is there)."""
    uses: list[tuple[tuple, str, str]] = []
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
    for index, slice_columns in enumerate(spec.evaluation.slices):  # TFMA slices the raw examples
        uses += [(("evaluation", "slices", index, position), column, "slice column")
                 for position, column in enumerate(slice_columns)]
    return uses


def check(loaded: LoadedSpec, problems: Problems) -> None:
    """Every column the spec names must be in the data."""
    from pipeline.load import closest

    found = known_columns(loaded)
    if found is None:
        return
    source, columns = found
    for path, column, what in column_uses(loaded.spec):
        if column not in columns:
            close = closest(column, columns)
            hint = f"did you mean {close!r}? " if close else ""
            problems.add(path, f"{what} {column!r} is not a column of {os.path.basename(source)}",
                         f"{hint}the data has: {', '.join(columns)}")
