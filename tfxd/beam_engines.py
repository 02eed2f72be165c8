"""The Beam runners a spec names (beam.runner), one row each, and the engines behind the portable ones:
Flink and Spark, each through Beam's portable job server.

A row says what the code would otherwise ask of a runner's name: whether Beam runs it in the component's
own process (sized by tfxd), submits it to a cloud service set by a target's section, or to a job server,
and for a job server's engine what it is (the main class, the flag that names its master and what a master
looks like, what `make engines` installs from engines/<name>/pom.xml and where). `problems` says, in a
user's words, what stops an engine from starting on this machine (no Java, Java too old, the jars not
installed), for `tfxd validate` and the run alike.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass

# The job servers are Beam 2.62.0's (engines/*/pom.xml), under Beam's 2.74 Python SDK (TFX 1.16's lock):
# Maven Central serves Beam's Flink 1.19 and Spark 3 runner modules whole at 2.62.0, and no shaded
# job-server jar at all. The portable protocol between the SDK and the job server is versioned protobuf:
# the suite runs 2.74 pipelines on it.
MIN_JAVA = 11  # Flink 1.19 and Spark 3.5 run on Java 11 and 17
ENGINES_ENV = "TFXD_ENGINES"  # where `make engines` put the jars, when not under this Python's prefix
# Where a run's Beam steps find the job server and the SDK worker pool of the engine tfxd started for it
# (set by pipeline/run/beam_engine.py, read through TFX placeholders in the Beam arguments).
JOB_ENDPOINT_ENV = "TFXD_BEAM_JOB_ENDPOINT"
WORKER_POOL_ENV = "TFXD_BEAM_WORKER_POOL"
# On a cluster, the SDK worker pool beside each TaskManager or Spark worker (Beam's Kubernetes recipes)
CLUSTER_WORKER_POOL_PORT = 50000

# What Java 17 closes and Flink, Spark and Beam's Kryo reach into (as Flink's and Spark's own launch
# scripts open them).
JVM_OPENS = tuple(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.io", "java.lang", "java.lang.invoke", "java.lang.reflect", "java.net", "java.nio", "java.text",
    "java.time", "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "sun.nio.ch",
    "sun.nio.cs", "sun.security.action", "sun.util.calendar"))


@dataclass(frozen=True)
class Runner:
    """A Beam runner as the spec names it. A runner with a ``target`` runs on a cloud service whose project,
    region, image and temp location come from that target's section; an Engine submits to a job server;
    any other runs in the component's own process (Beam's DirectRunner)."""

    name: str  # the spec's beam.runner
    title: str
    beam_runner: str  # the runner class Beam loads (`--runner`): Beam's own by name, or tfxd's by its dotted name
    target: str | None = None  # a cloud service's runner: the target (pipeline/spec/targets.py) it runs from
    sized_by: str | None = None  # where the spec's `workers` does not size it: the Beam flag that does

    @property
    def in_process(self) -> bool:
        """In the component's process and the worker processes it starts, sized by tfxd (beam.workers)."""
        return self.target is None and not isinstance(self, Engine)


@dataclass(frozen=True, kw_only=True)
class Engine(Runner):
    """A portable runner: Beam's job server for the engine, started by tfxd here or run by the user."""

    main: str  # the job server's main class
    master_flag: str  # the job server's flag naming the cluster's master
    master_example: str  # a cluster's master as a user writes it (the spec's reference, messages)
    master_scheme: str | None = None  # what a master must start with (None: host:port)
    embedded: str  # the master of an engine embedded here, {workers} its slots
    parallelism_flag: str | None = None  # the Beam flag for the engine's parallelism (None: the master sets it)
    env: tuple[tuple[str, str], ...] = ()  # the job server's own variables, {home} its folder
    embedded_properties: tuple[str, ...] = ()  # the job server's JVM system properties, embedded; {workers}
    version: str  # the engine's own version, as installed

    def embedded_master(self, workers: int) -> str:
        return self.embedded.format(workers=workers)

    def embedded_jvm_properties(self, workers: int) -> list[str]:
        return [prop.format(workers=workers) for prop in self.embedded_properties]


RUNNERS: dict[str, Runner] = {runner.name: runner for runner in (
    Runner("direct", "Direct", "DirectRunner"),
    Runner("dataflow", "Dataflow", "DataflowRunner", target="vertex", sized_by="--max_num_workers=N"),
    # Beam's FlinkJobServerDriver behind tfxd's main (engines/flink/src), which runs every job of a run on one
    # embedded Flink cluster of `workers` slots where Beam's [local] starts and stops a cluster for each job
    Engine("flink", "Flink", "tfxd.beam_runners.FlinkRunner", main="dev.tfxd.engines.flink.SessionJobServer",
           master_flag="--flink-master", master_example="flink-jobmanager:8081", embedded="[local]",
           parallelism_flag="--parallelism", version="1.19", embedded_properties=("-Dtfxd.flink.slots={workers}",)),
    # Beam's SparkJobServerDriver behind tfxd's main (engines/spark/src), which starts the run's SparkContext
    # with the job server where Beam's factory makes it in the first job; Spark's own launcher code finds its
    # jars under SPARK_HOME (jars/ and RELEASE)
    Engine("spark", "Spark", "tfxd.beam_runners.SparkRunner", main="dev.tfxd.engines.spark.SessionJobServer",
           master_flag="--spark-master-url", master_example="spark://host:7077", master_scheme="spark://",
           embedded="local[{workers}]", version="3.5.6",
           env=(("SPARK_HOME", "{home}"), ("SPARK_SCALA_VERSION", "2.12"), ("SPARK_LOCAL_IP", "127.0.0.1")),
           # one SparkContext for every job of the run, where Beam's runner makes and stops one a job
           # (SparkContextFactory: its property for Beam's own tests; a context a job, ~1 s and a Spark UI)
           embedded_properties=("-Dbeam.spark.test.reuseSparkContext=true",)),
)}
DEFAULT_RUNNER = "direct"
ENGINES: dict[str, Engine] = {name: runner for name, runner in RUNNERS.items() if isinstance(runner, Engine)}


def runner_named(beam_runner: str) -> Runner | None:
    """The row whose runner Beam's ``--runner`` loads, written any way Beam takes it: a class's dotted name
    (tfxd's or Beam's own of the same name), its name, or its name less "Runner", in any case
    (apache_beam/runners/runner.py, create_runner); None for a runner tfxd does not name."""
    wanted = beam_runner.rsplit(".", 1)[-1].lower()
    for runner in RUNNERS.values():
        name = runner.beam_runner.rsplit(".", 1)[-1].lower()
        if wanted in (name, name.removesuffix("runner")):
            return runner
    return None


def engines_dir() -> str:
    return os.environ.get(ENGINES_ENV) or os.path.join(sys.prefix, "share", "tfxd", "engines")


def home(engine: Engine) -> str:
    """The engine's folder: jars/ (the class path), and for Spark a Spark home (jars/ and RELEASE)."""
    return os.path.join(engines_dir(), engine.name)


def own_jar(engine: Engine) -> str:
    """The jar `make engines` makes of tfxd's own Java for the engine (engines/<name>/src), compiled against
    its jars. A jar, not a folder of classes: HotSpot shares classes only from jars, and refuses to archive
    them at all with a folder on the class path (pipeline/run/class_archive.py)."""
    return os.path.join(home(engine), f"tfxd-{engine.name}.jar")


def class_path(engine: Engine) -> str:
    """The engine's jars, and tfxd's own for it."""
    return os.pathsep.join([os.path.join(home(engine), "jars", "*"), own_jar(engine)])


def _installed(engine: Engine) -> bool:
    """Whether `make engines` filled the engine's folder: its jars, and the job server's main class where
    it is tfxd's own."""
    if not os.path.isdir(os.path.join(home(engine), "jars")):
        return False
    if not engine.main.startswith("dev.tfxd."):
        return True
    try:
        with zipfile.ZipFile(own_jar(engine)) as jar:
            return "/".join(engine.main.split(".")) + ".class" in jar.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def java() -> str | None:
    """The java that runs the engines: $JAVA_HOME's, else the first on PATH."""
    if os.environ.get("JAVA_HOME"):
        candidate = os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def java_version(executable: str) -> int | None:
    """The feature version (8, 11, 17, ...) `java -version` reports, None if it cannot say."""
    try:
        out = subprocess.run([executable, "-version"], capture_output=True, text=True, timeout=20).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0_402" is Java 8


def problems(engine: Engine) -> list[tuple[str, str]]:
    """What stops ``engine`` from starting here, as (what is wrong, how to fix it); empty when it can."""
    found = []
    executable = java()
    if executable is None:
        found.append((f"beam.runner {engine.name} runs Beam's {engine.title} job server on Java, and no java "
                      "is on PATH (nor under $JAVA_HOME)",
                      f"install Java {MIN_JAVA} or newer (Debian: apt-get install openjdk-17-jre-headless) "
                      "or set JAVA_HOME"))
    elif (version := java_version(executable)) is None or version < MIN_JAVA:
        found.append((f"{executable} is Java {version or 'of an unknown version'}; Beam's {engine.title} job "
                      f"server needs Java {MIN_JAVA} or newer",
                      "install Java 17 and put it first on PATH, or set JAVA_HOME to it"))
    if not _installed(engine):
        found.append((f"Beam's {engine.title} job server is not installed (looked in {home(engine)})",
                      f"run `make engines` in tfxd's checkout, or set {ENGINES_ENV} to the folder it filled"))
    return found
