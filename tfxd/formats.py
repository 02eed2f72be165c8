"""The data formats a spec reads (data.format), one row each: where the rows come from (the files at
data.path, or a query's result) and how a file's column names are told cheaply, for `tfxd validate`.

ExampleGen's readers of each file format are the code behind the rows (components/example_gen:
records.READERS row-wise, column_sources.SOURCES column-wise); tests/tfxd/test_runners_and_formats.py holds
their formats to the table's. A format read from a query has no file reader: ExampleGen reads it through
Beam's IO for that service (components/example_gen/bigquery.py).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass


def _csv_header(path: str) -> list[str] | None:
    """The names in a CSV file's first line."""
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as handle:
            header = next(csv.reader(handle), None)
    except (OSError, ValueError, csv.Error):
        return None
    return [name.strip() for name in header] if header else None


def _parquet_schema(path: str) -> list[str] | None:
    """The names in a Parquet file's schema, read from its footer."""
    import pyarrow.parquet as pq  # start-up: only a Parquet spec pays for pyarrow

    try:
        return list(pq.read_schema(path).names)
    except (OSError, ValueError):  # pyarrow's ArrowIOError and ArrowInvalid
        return None


@dataclass(frozen=True)
class Format:
    name: str  # the spec's data.format
    files: bool = True  # read from the files at data.path; False: from data.query, with no file reader
    # a file's column names, read without reading its rows (None: not told cheaply, or unreadable);
    # None for a format whose columns are known only from its records (JSON lines, tf.Examples)
    columns: Callable[[str], list[str] | None] | None = None


FORMATS: dict[str, Format] = {data_format.name: data_format for data_format in (
    Format("csv", columns=_csv_header),
    Format("parquet", columns=_parquet_schema),
    Format("tfrecord"),
    Format("jsonl"),
    Format("bigquery", files=False),
)}
