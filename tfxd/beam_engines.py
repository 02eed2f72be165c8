"""The distributed engines Beam runs on here: Flink and Spark, each through Beam's portable job server.

One table says what each engine is (the job server's main class, the flag that names its master, what
`make engines` installs and where); `problems` says, in a user's words, what stops one from starting on
this machine (no Java, Java too old, the jars not installed), for `tfxd validate` and the run alike.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
class Engine:
    name: str  # the spec's beam.runner
    title: str
    runner: str  # the Python runner class Beam loads (`--runner`): Beam's, optimized by the SDK (tfxd/beam_runners.py)
    main: str  # the job server's main class
    master_flag: str  # the job server's flag naming the cluster's master
    version: str  # the engine's own version, as installed

    def embedded_master(self, workers: int) -> str:
        return "[local]" if self.name == "flink" else f"local[{workers}]"


ENGINES: dict[str, Engine] = {
    "flink": Engine("flink", "Flink", "tfxd.beam_runners.FlinkRunner", "org.apache.beam.runners.flink.FlinkJobServerDriver",
                    "--flink-master", "1.19"),
    "spark": Engine("spark", "Spark", "tfxd.beam_runners.SparkRunner", "org.apache.beam.runners.spark.SparkJobServerDriver",
                    "--spark-master-url", "3.5.6"),
}


def engines_dir() -> str:
    return os.environ.get(ENGINES_ENV) or os.path.join(sys.prefix, "share", "tfxd", "engines")


def home(engine: Engine) -> str:
    """The engine's folder: jars/ (the class path), and for Spark a Spark home (jars/ and RELEASE)."""
    return os.path.join(engines_dir(), engine.name)


def class_path(engine: Engine) -> str:
    return os.path.join(home(engine), "jars", "*")


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
    if not os.path.isdir(os.path.join(home(engine), "jars")):
        found.append((f"Beam's {engine.title} job server is not installed (looked in {home(engine)})",
                      f"run `make engines` in tfxd's checkout, or set {ENGINES_ENV} to the folder it filled"))
    return found
