"""The job server's class archive (pipeline/run/class_archive.py): the first run's JVM writes it as it stops,
the next maps its classes from it. Judged by HotSpot itself: its -Xlog:class+load names where each class
came from, "shared objects file (top)" for one mapped from the archive the first run wrote (and the jar
in the first run: the bite), and a JVM given the archive with another class path refuses it, saying so, and
loads from the jars (so that an archive is never used where it does not fit: HotSpot checks). What tfxd
decides around it (which JVMs and class paths can have one, its name, what is kept after a JVM ends) on a
Java home and jars a test writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipeline.run.test_beam_engines import _ours
from tests.pipeline.run.test_flink_session import _classes_logged, jobs
from tfxd.beam_engines import ENGINES, class_path, java
from tfxd.pipeline.run import beam_engine, class_archive
from tfxd.pipeline.run.class_archive import WRITE_STOP_SECONDS, ClassArchive, for_job_server

MAPPED = "source: shared objects file (top)"  # HotSpot's class+load line for a class of the dynamic archive
REFUSED = "Unable to use shared archive"  # HotSpot's warning for an archive that does not fit the JVM's


def _source(log: Path, cls: str) -> str:
    """Where HotSpot's log says the JVM loaded ``cls`` from."""
    [line] = [line for line in log.read_text().splitlines() if f"[class,load] {cls} source: " in line]
    return line.split(" source: ", 1)[1]


def test_the_second_run_maps_the_job_servers_classes_from_the_archive_the_first_wrote(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "folder", lambda engine: str(tmp_path / "archives"))
    spark = ENGINES["spark"]
    jobs(_classes_logged(spark, tmp_path / "first.log"), tmp_path / "first", 1)
    [archive] = os.listdir(tmp_path / "archives")  # nothing half written beside it
    assert archive.startswith("spark-") and archive.endswith(".jsa")
    server, runner = spark.main, "org.apache.beam.runners.spark.SparkPipelineRunner"  # tfxd's jar, Beam's
    assert _source(tmp_path / "first.log", server).endswith("tfxd-spark.jar")  # the bite: read from the jar
    assert "jars/beam-runners-spark-3" in _source(tmp_path / "first.log", runner)

    jobs(_classes_logged(spark, tmp_path / "second.log"), tmp_path / "second", 1)
    assert _source(tmp_path / "second.log", server) == "shared objects file (top)"
    assert _source(tmp_path / "second.log", runner) == "shared objects file (top)"
    assert os.listdir(tmp_path / "archives") == [archive]
    assert _ours() == []

    # another class path: HotSpot refuses the archive itself, and the class comes from the jar
    refused = subprocess.run(
        [java(), f"-XX:SharedArchiveFile={tmp_path / 'archives' / archive}", "-Xlog:class+load=info",
         "-cp", class_path(spark).split(os.pathsep)[0], "org.apache.spark.SparkConf"],
        capture_output=True, text=True, timeout=120)
    assert REFUSED in refused.stdout + refused.stderr
    assert MAPPED not in refused.stdout


def _java_home(root: Path, version: str = "17.0.15", server_vm: bool = True) -> str:
    """A Java home as tfxd reads one: its release file, HotSpot's server VM library, bin/java."""
    (root / "bin").mkdir(parents=True)
    (root / "release").write_text(f'IMPLEMENTOR="Debian"\nJAVA_VERSION="{version}"\n')
    if server_vm:
        (root / "lib" / "server").mkdir(parents=True)
        (root / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    (root / "bin" / "java").write_text("#!/bin/sh\n")
    return str(root / "bin" / "java")


@pytest.fixture
def engine(tmp_path, monkeypatch):
    """A Spark engine whose jars are two files, its archives in tmp_path/archives."""
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("a.jar", "b.jar"):
        (jars / name).write_bytes(b"jar " + name.encode())
    monkeypatch.setattr(class_archive, "folder", lambda engine: str(tmp_path / "archives"))
    return ENGINES["spark"], f"{jars}{os.sep}*{os.pathsep}{tmp_path / 'jars' / 'a.jar'}"


def _written(archive: ClassArchive, returncode: int, content: bytes = b"archive") -> None:
    """What a JVM with ``archive``'s flags leaves: the file it wrote (none for empty ``content``), then its
    exit code as tfxd sees it."""
    if content:
        Path(archive.writing).write_bytes(content)
    archive.kept(returncode)


def test_a_jvm_without_an_archive_writes_one_that_the_next_maps(tmp_path, engine):
    spark, jars = engine
    executable = _java_home(tmp_path / "jdk")
    first = for_job_server(spark, executable, jars)
    assert first.flags == (f"-XX:ArchiveClassesAtExit={first.writing}", "-Xlog:cds*=error")
    assert first.stop_seconds == WRITE_STOP_SECONDS
    _written(first, 143)  # stopped by tfxd's SIGTERM: Java's exit code 128 + 15, its exit ran
    assert os.listdir(tmp_path / "archives") == [os.path.basename(first.final)]
    second = for_job_server(spark, executable, jars)
    assert second.flags == (f"-XX:SharedArchiveFile={first.final}",)
    assert second.writing is None and second.stop_seconds is None
    second.kept(143)
    assert os.listdir(tmp_path / "archives") == [os.path.basename(first.final)]


def test_new_jars_or_another_java_make_another_archive_and_the_older_goes(tmp_path, engine):
    spark, jars = engine
    executable = _java_home(tmp_path / "jdk")
    first = for_job_server(spark, executable, jars)
    _written(first, 143)
    (tmp_path / "jars" / "b.jar").write_bytes(b"another b")  # `make engines` with another version of b
    second = for_job_server(spark, executable, jars)
    assert second.writing and second.final != first.final
    other_java = for_job_server(spark, _java_home(tmp_path / "jdk21", "21.0.2"), jars)
    assert other_java.final not in (first.final, second.final)
    _written(second, 143)
    assert os.listdir(tmp_path / "archives") == [os.path.basename(second.final)]


def test_a_killed_jvm_leaves_no_archive_and_the_next_run_writes_one_again(tmp_path, engine):
    spark, jars = engine
    executable = _java_home(tmp_path / "jdk")
    first = for_job_server(spark, executable, jars)
    _written(first, -9, b"half an archive")  # SIGKILL: its exit did not run
    assert os.listdir(tmp_path / "archives") == []
    again = for_job_server(spark, executable, jars)
    assert again.flags[0].startswith("-XX:ArchiveClassesAtExit=")


def test_a_jvm_that_ended_on_its_own_leaves_no_archive_and_the_next_run_writes_one_again(tmp_path, engine):
    """A job server that failed to start exits on its own, and HotSpot archives what it had loaded by then."""
    spark, jars = engine
    executable = _java_home(tmp_path / "jdk")
    _written(for_job_server(spark, executable, jars), 1, b"a failed start's classes")
    assert os.listdir(tmp_path / "archives") == []
    assert for_job_server(spark, executable, jars).flags[0].startswith("-XX:ArchiveClassesAtExit=")


def test_a_jvm_that_exited_without_writing_one_is_not_asked_again(tmp_path, engine):
    spark, jars = engine
    executable = _java_home(tmp_path / "jdk")
    _written(for_job_server(spark, executable, jars), 143, b"")
    assert for_job_server(spark, executable, jars) == ClassArchive()


def test_a_jvm_killed_while_writing_leaves_a_file_the_next_kept_archive_removes(tmp_path, engine):
    spark, jars = engine
    executable = _java_home(tmp_path / "jdk")
    first = for_job_server(spark, executable, jars)
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    stale = f"{first.final}.{gone.pid}.writing"  # a run killed outright: its JVM's file, half written
    live = f"{first.final}.{os.getppid()}.writing"  # another run's, still writing
    Path(stale).write_bytes(b"half")
    Path(live).write_bytes(b"half")
    _written(first, 143)
    assert sorted(os.listdir(tmp_path / "archives")) == sorted(os.path.basename(path) for path in (first.final, live))


@pytest.mark.parametrize("what", ["java 11", "not hotspot", "no release", "a folder of classes", "a jar missing",
                                  "no folder for it"])
def test_no_archive_where_hotspot_cannot_make_or_keep_one(tmp_path, engine, what, monkeypatch):
    spark, jars = engine
    executable = _java_home(tmp_path / "jdk", "11.0.22" if what == "java 11" else "17.0.15",
                            server_vm=what != "not hotspot")
    if what == "no release":
        (tmp_path / "jdk" / "release").unlink()
    if what == "a folder of classes":  # HotSpot refuses to archive with a non-empty folder on the class path
        (tmp_path / "classes").mkdir()
        (tmp_path / "classes" / "Main.class").write_bytes(b"")
        jars = f"{jars}{os.pathsep}{tmp_path / 'classes'}"
    if what == "a jar missing":
        jars = f"{jars}{os.pathsep}{tmp_path / 'nowhere.jar'}"
    if what == "no folder for it":
        (tmp_path / "file").write_text("")
        monkeypatch.setattr(class_archive, "folder", lambda engine: str(tmp_path / "file" / "archives"))
    assert for_job_server(spark, executable, jars) == ClassArchive()


def test_a_jvm_writing_its_archive_is_given_its_own_time_to_stop(tmp_path, monkeypatch):
    """tfxd's stop of an engine's processes: SIGTERM, then SIGKILL at each one's deadline; the JVM that writes
    the archive as it exits has WRITE_STOP_SECONDS, the others STOP_SECONDS (here made short)."""
    monkeypatch.setattr(beam_engine, "STOP_SECONDS", 0.5)
    slow_exit = [sys.executable, "-c", "import signal, sys, time\n"
                 "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.5), sys.exit(143)))\n"
                 "print('ready', flush=True)\ntime.sleep(60)"]
    group = beam_engine._Processes()
    given = group.start("writing", slow_exit, str(tmp_path / "a.log"), dict(os.environ), 30)
    other = group.start("other", slow_exit, str(tmp_path / "b.log"), dict(os.environ))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(
            "ready" in (tmp_path / log).read_text() for log in ("a.log", "b.log")):
        time.sleep(0.05)
    group.stop()
    assert given.returncode == 143  # its own exit ran
    assert other.returncode == -9  # killed at STOP_SECONDS


def test_the_job_servers_command_carries_the_archives_flags(tmp_path):
    flags = ("-XX:SharedArchiveFile=/x/spark-0123456789abcdef.jsa",)
    command = beam_engine._job_server_command(ENGINES["spark"], [1, 2, 3], "local[2]", str(tmp_path), 2, flags)
    assert command.index(flags[0]) < command.index("-cp")  # a JVM option, before the class path
