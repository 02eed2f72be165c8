"""The job server's classes mapped from an archive of HotSpot's class-data sharing (CDS), made by the
first run of the engine on this machine, instead of read from the jars, parsed and verified anew in every
run's JVM.

An embedded engine's JVM lives for one run on the user's own cores, beside the SDK workers, and loads the
classes of Flink or Spark, Beam and gRPC anew in each: in a run to ExampleGen on 500,000 rows its JVM used
11-13 CPU seconds; with its classes mapped from an archive, 7-9.5, and ExampleGen took 1.3 s less on either
engine (bench/RESULTS.md). HotSpot makes such an archive itself: a JVM
started with ``-XX:ArchiveClassesAtExit=FILE`` (Java 13 and later) writes the classes it loaded to FILE as
it exits, and one started with ``-XX:SharedArchiveFile=FILE`` maps them, after checking that the archive
was made by the same JVM with the same class path (else it says so in its log, with a warning, and loads
every class from the jars as before). Java 19's ``-XX:+AutoCreateSharedArchive`` does both on its own;
this is the same for the Java 13 and later that tfxd's engines run on.

The first run with no archive for this Java and these jars has its JVM write one as it stops: some seconds
more at that run's end (the archive is ~95 MB). The JVM writes to a file of its own, kept under the
archive's name only when the JVM exited at tfxd's stop with all of it written: not killed (half an
archive), and not ended on its own (a failed start's few classes); such an attempt is made again by the
next run, and one HotSpot stopped without writing anything is not. An archive is named by what it was made
from (the JVM, each jar's name, size and time), so a new Java or new jars (`make engines`) make a new one,
and the older is removed. Where the engine's folder cannot be written, or the JVM is not HotSpot's of Java
13 or later, the job server runs as before.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import signal
from dataclasses import dataclass

from tfxd import process_table
from tfxd.beam_engines import Engine, home

FOLDER = "class-archives"  # under the engine's folder, beside its jars
MIN_JAVA = 13  # -XX:ArchiveClassesAtExit
WRITE_STOP_SECONDS = 120  # the stop of a JVM that writes the archive as it exits (~6 s on a slow 2-core machine)
STOPPED = 128 + signal.SIGTERM  # HotSpot's exit code at SIGTERM, once its exit (and the archive's writing) ran
_QUIET = "-Xlog:cds*=error"  # not a warning a class HotSpot leaves out (Java 5's, generated ones) as it writes


@dataclass(frozen=True)
class ClassArchive:
    """The JVM flags for the engine's archive, and where a JVM that writes one writes it (None: it maps
    the archive, or there is none to make)."""

    flags: tuple[str, ...] = ()
    writing: str | None = None
    final: str | None = None

    @property
    def stop_seconds(self) -> float | None:
        """How long the JVM may take to stop (None: as any engine process)."""
        return WRITE_STOP_SECONDS if self.writing else None

    def kept(self, returncode: int | None) -> None:
        """After the JVM ended with ``returncode``: the archive it wrote kept under its final name (the older
        archives of the engine removed) where tfxd stopped it after the run's jobs, or the attempt recorded
        where it was so stopped and wrote nothing. A JVM that ended on its own (a failed start) archived
        what it had loaded by then, and one that was killed half an archive: neither is kept."""
        if not self.writing or not self.final:
            return
        stopped = returncode == STOPPED  # its exit, with the archive's writing, ran at tfxd's SIGTERM
        if stopped and os.path.isfile(self.writing) and os.path.getsize(self.writing) > 0:
            older = [path for path in glob.glob(os.path.join(os.path.dirname(self.final), "*"))
                     if path not in (self.final, self.writing) and _left_over(path, self.final)]
            os.replace(self.writing, self.final)
            for path in older:
                with contextlib.suppress(OSError):
                    os.remove(path)
            return
        with contextlib.suppress(OSError):
            os.remove(self.writing)
        if stopped:
            with contextlib.suppress(OSError), open(_refused(self.final), "w"):
                pass


def for_job_server(engine: Engine, executable: str, class_path: str) -> ClassArchive:
    """The archive of ``engine``'s job server started by ``executable`` with ``class_path``: mapped if this
    JVM made one for these jars, else written by this run's JVM; none where that cannot be (the module's
    docstring)."""
    made_from = _made_from(executable, class_path)
    if made_from is None:
        return ClassArchive()
    kept_in = folder(engine)
    final = os.path.join(kept_in, f"{engine.name}-{hashlib.sha256(made_from.encode()).hexdigest()[:16]}.jsa")
    if os.path.isfile(final):
        return ClassArchive((f"-XX:SharedArchiveFile={final}",))
    if os.path.exists(_refused(final)):
        return ClassArchive()
    try:
        os.makedirs(kept_in, exist_ok=True)
    except OSError:
        return ClassArchive()
    if not os.access(kept_in, os.W_OK):
        return ClassArchive()
    writing = f"{final}.{os.getpid()}.writing"
    return ClassArchive((f"-XX:ArchiveClassesAtExit={writing}", _QUIET), writing, final)


def folder(engine: Engine) -> str:
    """Where ``engine``'s archives are kept: beside its jars, made again with them by `make engines`."""
    return os.path.join(home(engine), FOLDER)


def _made_from(executable: str, class_path: str) -> str | None:
    """What an archive of this JVM and class path depends on, as text; None where HotSpot cannot make one:
    not HotSpot's server VM (lib/server/libjvm.so), a Java older than MIN_JAVA or of a version its
    ``release`` file does not say, or a folder on the class path (HotSpot archives classes from jars alone)."""
    java_home = os.path.dirname(os.path.dirname(os.path.realpath(executable)))
    libjvm = os.path.join(java_home, "lib", "server", "libjvm.so")
    try:
        with open(os.path.join(java_home, "release"), encoding="utf-8") as handle:
            release = handle.read()
        jvm = os.stat(libjvm)
    except OSError:
        return None
    version = re.search(r'^JAVA_VERSION="(\d+)', release, re.MULTILINE)
    if version is None or int(version.group(1)) < MIN_JAVA:
        return None
    parts = [java_home, release, f"{jvm.st_size} {jvm.st_mtime_ns}"]
    for entry in class_path.split(os.pathsep):
        jars = sorted(glob.glob(os.path.join(entry[:-1], "*.jar"))) if entry.endswith("*") else [entry]
        for jar in jars:
            if not os.path.isfile(jar):  # a folder, or a jar that is not there
                return None
            stat = os.stat(jar)
            parts.append(f"{jar} {stat.st_size} {stat.st_mtime_ns}")
    return "\n".join(parts)


def _refused(final: str) -> str:
    return f"{final}.refused"


def _left_over(path: str, final: str) -> bool:
    """Whether ``path`` is another archive of the engine ``final`` is for, a record of one refused, or one a
    JVM that was killed left half written (its run's process gone)."""
    engine = os.path.basename(final).rsplit("-", 1)[0]
    match = re.fullmatch(rf"{re.escape(engine)}-[0-9a-f]{{16}}\.jsa(\.refused|\.(\d+)\.writing)?",
                         os.path.basename(path))
    return match is not None and (match.group(2) is None or process_table.stat(int(match.group(2))) is None)
