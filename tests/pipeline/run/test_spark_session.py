"""tfxd's Spark job server (engines/spark/src: dev.tfxd.engines.spark.SessionJobServer, Beam's
SparkJobServerDriver behind it) starts the run's one SparkContext as the job server starts, where Beam's
SparkContextFactory makes it when the first job asks. Judged by Spark's own log lines: SparkContext logs the
application it was made for ("Submitted application: NAME"), which is tfxd's where the job server made it and
the first job's where Beam's driver, started the same way, waits for a job to make it (the bite)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.pipeline.run.test_beam_engines import _ours
from tests.pipeline.run.test_flink_session import jobs
from tfxd.beam_engines import ENGINES

CONTEXT_MADE = "INFO SparkContext: Running Spark version"  # SparkContext's constructor, once per context
MADE_FOR = "INFO SparkContext: Submitted application: "  # then the application it is made for
SERVERS_APP = "tfxd"  # the application SessionJobServer names (APP_NAME)


def _applications(log: str) -> list[str]:
    return [line.split(MADE_FOR, 1)[1].strip() for line in log.splitlines() if MADE_FOR in line]


def test_the_runs_spark_context_starts_with_the_job_server(tmp_path):
    log = jobs(ENGINES["spark"], tmp_path, 2)
    assert log.count(CONTEXT_MADE) == 1
    assert _applications(log) == [SERVERS_APP]
    assert "The run's Spark context started with the job server (local[1])" in log
    assert _ours() == []


def test_beams_own_driver_makes_the_context_in_the_first_job(tmp_path):
    beams = dataclasses.replace(ENGINES["spark"], main="org.apache.beam.runners.spark.SparkJobServerDriver")
    log = jobs(beams, tmp_path, 1)
    assert log.count(CONTEXT_MADE) == 1
    [application] = _applications(log)
    assert application.startswith("BeamApp-"), application  # the job's name: the job made it
    assert _ours() == []


def test_a_context_that_cannot_start_fails_the_first_job_saying_why(tmp_path):
    """The job server's attempt is logged; the first job tries again and fails with Spark's own reason (here
    a master Spark cannot parse, which SparkConf takes from the JVM's spark.* properties over Beam's)."""
    unparsable = dataclasses.replace(ENGINES["spark"], embedded_properties=(
        *ENGINES["spark"].embedded_properties, "-Dspark.master=nonsense://nowhere"))
    with pytest.raises(RuntimeError, match="Could not parse Master URL: 'nonsense://nowhere'"):
        jobs(unparsable, tmp_path, 1)
    log = (tmp_path / "logs" / "spark-job-server.log").read_text(errors="replace")
    assert "The run's Spark context did not start with the job server; the first job tries again" in log
    assert _ours() == []
