"""BigQuery input: a standard-SQL query read with Beam's BigQuery IO, rows as tfxd records."""

from __future__ import annotations

from typing import Any

import apache_beam as beam

from tfxd.components.example_gen import records


class ReadQuery(beam.PTransform):
    """``query`` -> ("input", Row) pairs; ``project`` bills the query (the vertex target's project)."""

    def __init__(self, query: str, project: str | None) -> None:
        super().__init__()
        self.query = query
        self.project = project

    def source(self) -> beam.PTransform:
        return beam.io.ReadFromBigQuery(query=self.query, use_standard_sql=True, project=self.project)

    def expand(self, pipeline: beam.Pipeline):
        return pipeline | "ReadFromBigQuery" >> self.source() | "ToRows" >> beam.Map(_to_row)


def _to_row(record: dict[str, Any]) -> tuple[str, records.Row]:
    values, problem = records.plain_values(record)
    if problem:
        raise records.BadRecordError("bigquery row", "nested value", f"{problem}; flatten STRUCT columns in the query")
    return "input", records.Row("bigquery row", values)
