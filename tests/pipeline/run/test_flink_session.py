"""tfxd's Flink job server (engines/flink/src: dev.tfxd.engines.flink.SessionJobServer, Beam's
FlinkJobServerDriver behind it) runs every job of a run on one embedded Flink cluster, where Beam's own
`--flink-master=[local]` starts a mini cluster for each job and shuts it down after (a TFX component is a
job). Judged by Flink's own log lines (MiniCluster's "Starting Flink Mini Cluster", the ExecutionGraph's job
states) and by what the jobs wrote; Beam's own driver, started the same way, starts a cluster a job (the
bite). Its jobs are not asked for the jars to stage, which Beam's invoker finds by a ClassGraph scan of the
class path for every job and an embedded cluster never reads: judged by HotSpot's own log of the classes
the job server's JVM loaded."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tests.pipeline.run.test_beam_engines import _ours
from tfxd.beam_engines import ENGINES, Engine
from tfxd.pipeline.run import beam_engine

CLUSTER_STARTS = "Starting Flink Mini Cluster"  # org.apache.flink.runtime.minicluster.MiniCluster.start
JOB_FINISHED = "switched from state RUNNING to FINISHED."  # ExecutionGraph, once per job
# the scan Beam's default PipelineResourcesDetector runs (ClasspathScanningResourcesDetector), as HotSpot's
# -Xlog:class+load names the class it loads
SCANNER_LOADED = "io.github.classgraph.ClassGraph "


def _classes_logged(engine: Engine, log: Path) -> Engine:
    """``engine`` with its job server's JVM logging every class it loads to ``log`` (HotSpot's unified log)."""
    return dataclasses.replace(engine, embedded_properties=(*engine.embedded_properties,
                                                            f"-Xlog:class+load=info:file={log}"))


def jobs(engine: Engine, folder: Path, count: int = 2) -> str:
    """``count`` Beam jobs, one after the other, on ``engine`` (through its own runner) embedded with one slot;
    its job server's log. tests/pipeline/run/test_spark_session.py runs Spark's the same way."""
    parallelism = [f"{engine.parallelism_flag}=1"] if engine.parallelism_flag else []
    with beam_engine.running(engine, None, 1, str(folder / "logs")) as running:
        for index in range(count):
            out = folder / f"job{index}.txt"
            options = PipelineOptions([
                f"--runner={engine.beam_runner}", f"--job_endpoint={running.job_endpoint}",
                "--environment_type=EXTERNAL", f"--environment_config={running.worker_pool}", *parallelism])
            with beam.Pipeline(options=options) as pipeline:
                _ = (pipeline | beam.Create([1, 2, 3]) | beam.Map(lambda x, i=index: x * 10 + i)
                     | beam.io.WriteToText(str(out), shard_name_template=""))
            assert sorted(int(line) for line in out.read_text().split()) == [10 + index, 20 + index, 30 + index]
        return Path(running.job_server_log).read_text(errors="replace")


def test_the_jobs_of_a_run_share_one_embedded_flink_cluster(tmp_path):
    loaded = tmp_path / "classes.log"
    log = jobs(_classes_logged(ENGINES["flink"], loaded), tmp_path)
    assert log.count(JOB_FINISHED) == 2
    assert log.count(CLUSTER_STARTS) == 1
    assert log.count("no jars staged (the class path is not scanned)") == 2
    assert "org.apache.beam.runners.flink.FlinkJobInvoker " in loaded.read_text()  # the log is the JVM's
    assert SCANNER_LOADED not in loaded.read_text()
    assert _ours() == []


def test_beams_own_driver_starts_a_cluster_and_scans_the_class_path_for_every_job(tmp_path):
    beams = dataclasses.replace(ENGINES["flink"], main="org.apache.beam.runners.flink.FlinkJobServerDriver")
    loaded = tmp_path / "classes.log"
    log = jobs(_classes_logged(beams, loaded), tmp_path)
    assert log.count(JOB_FINISHED) == 2
    assert log.count(CLUSTER_STARTS) == 2
    assert SCANNER_LOADED in loaded.read_text()
    assert _ours() == []


def test_a_cluster_that_cannot_start_fails_the_job_saying_why(tmp_path):
    """The cluster starts beside the job server; the first job waits for it, and fails with Flink's reason
    where it could not start (here no task slots: Flink's own check)."""
    slotless = dataclasses.replace(ENGINES["flink"], embedded_properties=("-Dtfxd.flink.slots=0",))
    with pytest.raises(RuntimeError, match="failed in state FAILED") as failed:
        jobs(slotless, tmp_path)
    assert "Number of task slots must be at least one" in str(failed.value)
    log = (tmp_path / "logs" / "flink-job-server.log").read_text(errors="replace")
    assert "The embedded Flink cluster did not start" in log and CLUSTER_STARTS in log
    assert _ours() == []
