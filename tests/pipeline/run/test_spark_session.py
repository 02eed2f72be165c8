"""tfxd's Spark job server (engines/spark/src: dev.tfxd.engines.spark.SessionJobServer, Beam's
SparkJobServerDriver behind it) starts the run's one SparkContext as the job server starts, where Beam's
SparkContextFactory makes it when the first job asks. Judged by Spark's own log lines: SparkContext logs the
application it was made for ("Submitted application: NAME"), which is tfxd's where the job server made it and
the first job's where Beam's driver, started the same way, waits for a job to make it (the bite)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tests.pipeline.run.test_beam_engines import _ours
from tfxd.beam_engines import ENGINES, Engine
from tfxd.pipeline.run import beam_engine

CONTEXT_MADE = "INFO SparkContext: Running Spark version"  # SparkContext's constructor, once per context
MADE_FOR = "INFO SparkContext: Submitted application: "  # then the application it is made for
SERVERS_APP = "tfxd"  # the application SessionJobServer names (APP_NAME)


def _jobs(engine: Engine, folder: Path, count: int) -> str:
    """``count`` Beam jobs, one after the other, on ``engine`` embedded with one slot; its job server's log."""
    with beam_engine.running(engine, None, 1, str(folder / "logs")) as running:
        for index in range(count):
            out = folder / f"job{index}.txt"
            options = PipelineOptions([
                "--runner=tfxd.beam_runners.SparkRunner", f"--job_endpoint={running.job_endpoint}",
                "--environment_type=EXTERNAL", f"--environment_config={running.worker_pool}"])
            with beam.Pipeline(options=options) as pipeline:
                _ = (pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x, i=index: x * 10 + i)
                     | beam.io.WriteToText(str(out), shard_name_template=""))
            assert sorted(int(line) for line in out.read_text().split()) == [10 + index, 20 + index, 30 + index]
        return Path(running.job_server_log).read_text(errors="replace")


def _applications(log: str) -> list[str]:
    return [line.split(MADE_FOR, 1)[1].strip() for line in log.splitlines() if MADE_FOR in line]


def test_the_runs_spark_context_starts_with_the_job_server(tmp_path):
    log = _jobs(ENGINES["spark"], tmp_path, 2)
    assert log.count(CONTEXT_MADE) == 1
    assert _applications(log) == [SERVERS_APP]
    assert "The run's Spark context started with the job server (local[1])" in log
    assert _ours() == []


def test_beams_own_driver_makes_the_context_in_the_first_job(tmp_path):
    beams = dataclasses.replace(ENGINES["spark"], main="org.apache.beam.runners.spark.SparkJobServerDriver")
    log = _jobs(beams, tmp_path, 1)
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
        _jobs(unparsable, tmp_path, 1)
    log = (tmp_path / "logs" / "spark-job-server.log").read_text(errors="replace")
    assert "The run's Spark context did not start with the job server; the first job tries again" in log
    assert _ours() == []
