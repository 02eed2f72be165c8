"""What ExampleGen's Beam pipeline reports to its executor: files of counts and column names in a report
folder, written by the workers. Light on purpose: a Beam worker imports this module to unpickle the
writer, and importing the executor would bring TFX and TensorFlow into every worker (seconds each)."""

from __future__ import annotations

import json
import os
from typing import Any

import apache_beam as beam

BAD_RECORDS_FILE = "bad_records.json"
SPLIT_COUNTS_FILE = "split_counts.json"
COLUMNS_FILE = "columns.json"
WRITTEN_FILE = "written.json"  # the column-wise pipeline's pieces, what each wrote (columnar.Written)


def write_json(content: Any, path: str) -> None:
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        handle.write(json.dumps(content, sort_keys=True).encode("utf-8"))


def write_columns_and_bad(seen, bad: list, report_dir: str) -> None:
    """The columns seen and the bad records' reasons counted, as files of ``report_dir``."""
    (seen | "ColumnNames" >> beam.Map(sorted)
     | "WriteColumns" >> beam.Map(write_json, os.path.join(report_dir, COLUMNS_FILE)))
    (tuple(bad) | "AllBad" >> beam.Flatten()
     | "CountBad" >> beam.combiners.Count.PerElement()
     | "BadToDict" >> beam.combiners.ToDict()
     | "WriteBad" >> beam.Map(write_json, os.path.join(report_dir, BAD_RECORDS_FILE)))
