"""Beam on real engines: the taxi example end to end on an embedded Flink (2 SDK worker processes) and on a
Spark standalone cluster (a master and a worker, separate JVMs on loopback), each against the DirectRunner
run of the same spec; what a machine without Java is told; an engine failing or stopped mid-run; nothing of
the engines left running."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import BASE_SPEC, run_cli, write_spec
from tests.pipeline.run.test_run_taxi import example_project, summaries, tf_records, tfxd
from tfxd.beam_engines import ENGINES, JVM_OPENS, class_path, home, java
from tfxd.pipeline.run.beam_engine import _free_port
from tfxd.process_table import WORKER_NAME, stat

WORKERS = ("--set", "beam.workers=2")
JOB_SERVERS = tuple(engine.main for engine in ENGINES.values())  # the job servers' main classes


def _ours() -> list[str]:
    """Processes an engine of tfxd's would leave: a job server or Spark JVM, a worker pool (tfxd's, and its
    forked SDK workers, which keep its command line; Beam's) or an SDK worker of Beam's pool (whole command
    lines: ps cuts them at 80 columns where its output is not a terminal). Under pytest-xdist, only those
    this worker's tests started (each inherits the worker's PYTEST_XDIST_WORKER, however far it wandered
    from its parent), so that engine tests on the other worker are none of its business."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    # Beam's own job server drivers too (JobServerDriver): test_flink_session starts one
    marks = (*JOB_SERVERS, "JobServerDriver", "tfxd.pipeline.run.sdk_worker_pool", "sdk_worker_pool.main",
             "worker_pool_main", "SdkHarness", "org.apache.spark.deploy")
    return [line for line in out.splitlines() if any(mark in line for mark in marks) and _started_here(line)]


def _started_here(ps_line: str) -> bool:
    """Whether the process of a `ps -o pid=,args=` line carries this pytest-xdist worker's name (every
    process, outside pytest-xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return True
    try:
        environ = Path(f"/proc/{ps_line.split()[0]}/environ").read_bytes().split(b"\0")
    except OSError:
        return False  # ended meanwhile
    return f"PYTEST_XDIST_WORKER={worker}".encode() in environ


@pytest.fixture(scope="module")
def direct_run(tmp_path_factory):
    folder = example_project(tmp_path_factory, "taxi")
    result = tfxd("run", "taxi.yaml", *WORKERS, cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    return folder


@contextlib.contextmanager
def spark_standalone(work: Path):
    """A Spark standalone master and one worker (2 cores), Spark's own Master and Worker from the jars
    `make engines` installed, on loopback, and tfxd's SDK worker pool beside the worker, as docs/data.md
    ("Beam on Flink and Spark") has a cluster run one beside each worker (Beam's own pool is judged against
    it in tests/pipeline/run/test_sdk_worker_pool.py); stopped with their executors when the block ends.
    Yields the master's URL and the pool's address."""
    engine = ENGINES["spark"]
    port = _free_port()
    env = dict(os.environ, SPARK_HOME=home(engine), SPARK_SCALA_VERSION="2.12", SPARK_LOCAL_IP="127.0.0.1",
               SPARK_WORKER_DIR=str(work / "worker"))
    base = [java(), *JVM_OPENS, f"-Djava.io.tmpdir={work}", "-cp", class_path(engine)]
    def start(log: str, *args: str) -> subprocess.Popen:
        with open(work / log, "wb") as out:
            return subprocess.Popen([*base, *args], env=env, start_new_session=True, stdout=out,
                                    stderr=subprocess.STDOUT)

    master = start("master.log", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                   str(port), "--webui-port", str(_free_port()))
    worker = start("worker.log", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
                   "--memory", "4g", "--webui-port", str(_free_port()), f"spark://127.0.0.1:{port}")
    pool_port = _free_port()
    with open(work / "pool.log", "wb") as out:
        pool = subprocess.Popen([sys.executable, "-m", "tfxd.pipeline.run.sdk_worker_pool",
                                 f"--service_port={pool_port}"], start_new_session=True, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while b"Successfully registered with master" not in (work / "worker.log").read_bytes():
            assert time.monotonic() < deadline, (work / "worker.log").read_text()
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}", f"localhost:{pool_port}"
    finally:
        for process in (pool, worker, master):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _stats(folder: Path, split: str):
    from tensorflow_data_validation import load_stats_binary

    [path] = glob.glob(str(folder / "tfxd-runs/taxi-tips/pipeline/StatisticsGen/statistics/*/"
                             f"Split-{split}/FeatureStats.pb"))
    [dataset] = load_stats_binary(path).datasets
    numeric = {f.path.step[0]: (f.num_stats.mean, f.num_stats.std_dev, f.num_stats.common_stats.num_non_missing)
               for f in dataset.features if f.HasField("num_stats")}
    strings = {f.path.step[0]: (f.string_stats.unique, f.string_stats.common_stats.num_non_missing)
               for f in dataset.features if f.HasField("string_stats")}
    return dataset.num_examples, numeric, strings


def _transformed_columns(folder: Path) -> dict[str, np.ndarray]:
    """Transform's train examples, each column's values sorted (the engines write records in their own
    order)."""
    examples = tf_records(str(folder / "tfxd-runs/taxi-tips/pipeline/Transform/transformed_examples/*/"
                                       "Split-train/*.gz"))
    columns: dict[str, list] = {}
    for example in examples:
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            columns.setdefault(name, []).extend(getattr(feature, kind).value)
    return {name: np.sort(np.array(values)) for name, values in columns.items()}


def _same_results(engine_run: Path, direct: Path) -> None:
    """Split counts, statistics and Transform's outputs as the DirectRunner's. Means and deviations to 1e-9
    relative and z-scores to 1e-5: the engines add the same numbers in another order."""
    [ours], [theirs] = summaries(engine_run), summaries(direct)
    assert ours["status"] == "ok" and ours["blessed"], ours
    assert ours["examples"]["splits"] == theirs["examples"]["splits"] == {"train": 12014, "eval": 2988}
    for split in ("train", "eval"):
        count, numeric, strings = _stats(engine_run, split)
        count_direct, numeric_direct, strings_direct = _stats(direct, split)
        assert count == count_direct and strings == strings_direct
        assert numeric.keys() == numeric_direct.keys()
        for name, values in numeric.items():
            np.testing.assert_allclose(values, numeric_direct[name], rtol=1e-9, err_msg=name)
    columns, columns_direct = _transformed_columns(engine_run), _transformed_columns(direct)
    assert columns.keys() == columns_direct.keys()
    for name, values in columns.items():
        if values.dtype.kind == "f":
            np.testing.assert_allclose(values, columns_direct[name], rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(values, columns_direct[name], err_msg=name)


def test_taxi_on_an_embedded_flink_gives_the_direct_runners_results(tmp_path_factory, direct_run):
    folder = example_project(tmp_path_factory, "taxi")
    result = tfxd("run", "taxi.yaml", "--set", "beam.runner=flink", *WORKERS, cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Flink 1.19 through Beam's job server (embedded, 2 SDK worker processes)" in result.stdout
    [log] = glob.glob(str(folder / "tfxd-runs/taxi-tips/runs/*/logs/flink-job-server.log"))
    finished = Path(log).read_text(errors="replace").count("switched from state RUNNING to FINISHED.")
    assert finished >= 4  # Flink ran ExampleGen's, StatisticsGen's, Transform's and the Evaluator's jobs
    workers = Path(log).with_name("sdk-workers.log").read_text(errors="replace")
    assert workers.count("started worker") >= 2  # SDK workers: processes the pool forked
    _same_results(folder, direct_run)
    assert _ours() == []


def test_taxi_on_a_spark_standalone_cluster_gives_the_direct_runners_results(tmp_path_factory, direct_run):
    folder = example_project(tmp_path_factory, "taxi")
    cluster = tmp_path_factory.mktemp("spark")
    with spark_standalone(cluster) as (master, pool):
        result = tfxd("run", "taxi.yaml", "--set", "beam.runner=spark", "--set", f"beam.master={master}",
                      "--set", f'beam.args=["--environment_config={pool}"]', cwd=folder)
        assert result.returncode == 0, result.stdout + result.stderr
    assert f"Spark 3.5.6 through Beam's job server (submitting to {master})" in result.stdout
    assert "tfxd's SDK worker pool: started worker" in (cluster / "pool.log").read_text()  # the cluster's pool's
    _same_results(folder, direct_run)
    assert _ours() == []


def test_no_java_is_refused_at_validate_with_the_fix(project, monkeypatch):
    spec = write_spec(project, BASE_SPEC + "beam: {runner: flink}\n")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    bare = project / "bin"
    bare.mkdir()
    monkeypatch.setenv("PATH", str(bare))
    result = run_cli("validate", str(spec))
    assert result.exit_code == 2
    assert "beam.runner" in result.output and "no java is on PATH" in result.output
    assert "apt-get install openjdk-17-jre-headless" in result.output


def test_engine_jars_not_installed_are_refused_at_validate(project, monkeypatch):
    spec = write_spec(project, BASE_SPEC + "beam: {runner: spark}\n")
    monkeypatch.setenv("TFXD_ENGINES", str(project / "nowhere"))
    result = run_cli("validate", str(spec))
    assert result.exit_code == 2
    assert "Beam's Spark job server is not installed" in result.output and "make engines" in result.output


@pytest.mark.parametrize(("engine", "title"), [("flink", "Flink"), ("spark", "Spark")])
def test_jars_without_tfxds_own_main_compiled_are_refused_at_validate(project, monkeypatch, engine, title):
    """Each job server runs tfxd's main (engines/<name>/src), which `make engines` compiles into a jar beside
    the engine's jars."""
    spec = write_spec(project, BASE_SPEC + f"beam: {{runner: {engine}}}\n")
    engines = project / "engines"
    (engines / engine / "jars").mkdir(parents=True)
    monkeypatch.setenv("TFXD_ENGINES", str(engines))
    result = run_cli("validate", str(spec))
    assert result.exit_code == 2
    assert f"Beam's {title} job server is not installed" in result.output and "make engines" in result.output
    with zipfile.ZipFile(engines / engine / f"tfxd-{engine}.jar", "w") as jar:
        jar.writestr("dev/tfxd/engines/other/Main.class", b"")
    assert run_cli("validate", str(spec)).exit_code == 2  # a jar without the main class
    with zipfile.ZipFile(engines / engine / f"tfxd-{engine}.jar", "w") as jar:
        jar.writestr("/".join(ENGINES[engine].main.split(".")) + ".class", b"")
    assert run_cli("validate", str(spec)).exit_code == 0


def test_an_engine_that_cannot_start_fails_the_run_naming_it_and_leaves_nothing(tmp_path_factory, tmp_path):
    """A Java that dies at once (here a script in its place) fails the run naming the engine and its log,
    before any component ran, with the end of the job server's own log (it dies while the worker pool starts
    beside it); the worker pool is stopped."""
    folder = example_project(tmp_path_factory, "taxi")
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text('#!/bin/sh\nif [ "$1" = -version ]; then echo \'openjdk version "17.0.1"\' >&2; '
                               'exit 0; fi\necho "Error: could not reserve enough space for object heap" >&2\n'
                               'exit 1\n')
    (fake / "java").chmod(0o755)
    result = tfxd("run", "taxi.yaml", "--set", "beam.runner=flink", *WORKERS, cwd=folder,
                  env={"JAVA_HOME": str(fake.parent)})
    assert result.returncode == 1
    said = result.stdout + result.stderr
    assert "the flink engine failed: Beam's Flink job server ended with exit code 1 while starting" in said
    assert "could not reserve enough space" in said and "flink-job-server.log" in said
    assert _ours() == []
    assert shutil.which("java")  # the real one is untouched


def _up_to_transform(folder: Path) -> subprocess.Popen:
    """`tfxd run --to Transform` on an embedded Flink, returned once Transform has started."""
    command = [os.path.join(os.path.dirname(sys.executable), "tfxd"), "run", "taxi.yaml", "--to", "Transform",
               "--set", "beam.runner=flink", *WORKERS]
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("> Transform"):
            return process
    raise AssertionError(f"Transform never started: {process.communicate(timeout=60)}")


def _kill_busy_workers(process: subprocess.Popen) -> list[str]:
    """SIGKILL to the SDK workers Transform's job started, once connected and busy with its bundles (one
    killed before it connects: tests/pipeline/run/test_engine_watch.py)."""
    earlier = set(_sdk_workers())  # earlier jobs', kept a minute
    seen: dict[str, float] = {}
    killed: list[str] = []
    while process.poll() is None and not killed:
        for pid in _sdk_workers():
            if pid not in earlier:
                seen.setdefault(pid, time.monotonic())
        busy = [pid for pid, since in seen.items() if time.monotonic() - since > 2]  # forked: ready at once
        for pid in busy:
            os.kill(int(pid), signal.SIGKILL)
        killed.extend(busy)
        time.sleep(0.2)
    return killed


def _sdk_workers() -> list[str]:
    """The pids of tfxd's SDK workers alive: named `sdk <worker id>` (pipeline/run/sdk_worker_pool.py)."""
    pids = [line.split()[0] for line in _ours()]
    return [pid for pid in pids if (seen := stat(int(pid))) and seen[1].startswith(WORKER_NAME) and seen[0] != "Z"]


def _job_server(process: subprocess.Popen) -> int:
    """The pid of the job server JVM a `tfxd run` started."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        found = [line.split()[0] for line in _ours() if any(main in line for main in JOB_SERVERS)]
        if found:
            return int(found[0])
        time.sleep(0.2)
    raise AssertionError(f"no job server: {_ours()}; {process.communicate(timeout=60)}")


@pytest.mark.reliability("environment fault")
def test_an_engine_that_fails_or_is_stopped_mid_transform_fails_it_by_name_and_the_rerun_resumes(tmp_path_factory):
    """Transform on an embedded Flink, stopped three ways, each leaving nothing running: its SDK workers
    killed (Transform fails naming them and the engine's logs), the job server killed (Transform fails naming
    it) and Ctrl-C (interrupted, exit 130; tfxd killed outright: tests/pipeline/run/test_engine_watch.py).
    Then the run resumes: ExampleGen to ExampleValidator from the cache, Transform runs."""
    folder = example_project(tmp_path_factory, "taxi")

    process = _up_to_transform(folder)
    killed = _kill_busy_workers(process)
    said = "".join(process.communicate(timeout=600))
    assert killed and process.returncode == 1, said
    assert "Transform failed: an SDK worker (worker id " in said and "was killed by signal 9 (SIGKILL" in said
    assert "sdk-workers.log" in said and "flink-job-server.log" in said
    assert "Traceback" not in said
    assert _ours() == []

    process = _up_to_transform(folder)
    os.kill(_job_server(process), signal.SIGKILL)
    said = "".join(process.communicate(timeout=600))
    assert process.returncode == 1, said
    assert ("Transform failed: Beam's Flink job server was killed by signal 9 (SIGKILL: out of memory, or "
            "stopped from outside) while the run used it") in said
    assert "Traceback" not in said
    assert _ours() == []

    process = _up_to_transform(folder)
    process.send_signal(signal.SIGINT)
    said = "".join(process.communicate(timeout=120))
    assert process.returncode == 130, said
    assert "interrupted by SIGINT during Transform" in said
    assert _ours() == []

    rerun = tfxd("run", "taxi.yaml", "--to", "Transform", "--set", "beam.runner=flink", *WORKERS, cwd=folder)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    statuses = {c["name"]: c["status"] for c in summaries(folder)[-1]["components"]}
    assert statuses == {"ExampleGen": "cached", "StatisticsGen": "cached", "SchemaGen": "cached",
                        "ExampleValidator": "cached", "Transform": "ran"}
    assert _ours() == []


class _LowestFreePortKernel:
    """A kernel as POSIX allows it to answer a bind to port 0: the lowest port of its range that no socket
    holds, so a port let go is the next one handed out (Linux picks at random, and handed the job server's
    artifact and expansion services one port once: the job server failed, Address already in use)."""

    def __init__(self) -> None:
        self.held: set[int] = set()
        kernel = self

        class Socket:
            def __init__(self, *args) -> None:
                self.port = None

            def bind(self, address) -> None:
                self.port = min(set(range(40000, 40100)) - kernel.held)
                kernel.held.add(self.port)

            def getsockname(self):
                return ("127.0.0.1", self.port)

            def close(self) -> None:
                kernel.held.discard(self.port)

            def __enter__(self):
                return self

            def __exit__(self, *exc) -> None:
                self.close()

        self.socket = Socket


def test_the_job_servers_ports_are_chosen_together_and_differ(monkeypatch, tmp_path):
    from tfxd.pipeline.run import beam_engine

    kernel = _LowestFreePortKernel()
    monkeypatch.setattr(beam_engine.socket, "socket", kernel.socket)
    assert [beam_engine._free_port() for _ in range(3)] == [40000] * 3  # one at a time: the bite
    ports = beam_engine._free_ports(3)
    assert ports == [40000, 40001, 40002] and not kernel.held  # every probe let go once all are chosen
    command = beam_engine._job_server_command(ENGINES["flink"], ports, "[local]", str(tmp_path), 2)
    assert [arg for arg in command if arg.split("=")[0] in ("--job-port", "--artifact-port", "--expansion-port")] \
        == ["--job-port=40000", "--artifact-port=40001", "--expansion-port=40002"]
