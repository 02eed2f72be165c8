"""BigQuery cannot be reached from here: the read is tested up to the PTransform it builds."""

from __future__ import annotations

import apache_beam as beam
import pytest

from tfxd.components.example_gen import bigquery
from tfxd.components.example_gen.records import BadRecordError


def test_read_query_builds_a_standard_sql_bigquery_read():
    read = bigquery.ReadQuery("SELECT fare, tips FROM `p.d.taxi`", "my-project")
    source = read.source()
    assert isinstance(source, beam.io.ReadFromBigQuery)
    assert source._kwargs["query"] == "SELECT fare, tips FROM `p.d.taxi`"
    assert source._kwargs["use_standard_sql"] is True
    assert source._kwargs["project"] == "my-project"


def test_rows_become_records():
    split, row = bigquery._to_row({"fare": 1.5, "flag": True, "tags": ["a", None]})
    assert split == "input"
    assert row.values == {"fare": 1.5, "flag": 1, "tags": ["a"]}
    with pytest.raises(BadRecordError, match="flatten STRUCT columns"):
        bigquery._to_row({"nested": {"a": 1}})
