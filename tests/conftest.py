"""Shared fixtures: a small valid project written by each test into its own folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.network_guard import sitecustomize as network_guard
from tfxd.cli.main import cli

REPO = Path(__file__).resolve().parent.parent

BASE_SPEC = textwrap.dedent("""\
    tfxd: 1
    name: demo
    data:
      format: csv
      path: data.csv
    features:
      - name: x
        transform: zscore
      - name: city
        transform: vocabulary
        top_k: 10
    label:
      name: y
      column: target
      task: binary
    training:
      batch_size: 32
      steps: 10
    """)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with data.csv and nothing else; tests write their spec into it."""
    (tmp_path / "data.csv").write_text("x,city,target\n1.0,a,1\n2.0,b,0\n", encoding="utf-8")
    return tmp_path


def write_spec(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def started() -> Iterator[list]:
    """The processes a test starts (Popen) and the ones they start that it watches (psutil.Process): any
    still running at the end (a failed test) are killed."""
    import psutil  # only the tests that kill a Trainer's processes need it

    processes: list = []
    yield processes
    for process in processes:
        if isinstance(process, psutil.Process):
            if process.is_running():
                process.kill()
        elif process.poll() is None:
            process.kill()
            process.communicate()


def own_temp_dir(folder: Path) -> str:
    """A temporary folder of its own, in the test's ``folder``, to give a process as TMPDIR where it is
    expected to leave files there: a run the test kills (a killed process cannot remove its own). The
    session checks that nothing else is left in the temporary folder."""
    return tempfile.mkdtemp(dir=folder, prefix="own-tmp-")


# The failure cases bench/reliability.py counts, one kind each: `@pytest.mark.reliability(KIND)` on a test
# (or a parametrized case) that makes a real failure happen and asserts it is handled well.
RELIABILITY_KINDS = ("bad spec", "bad data", "crash point", "environment fault", "compiled file")


@pytest.fixture(autouse=True)
def _reliability_kind(request: pytest.FixtureRequest, record_property) -> None:
    """The case's kind, into the junit report that bench/reliability.py reads."""
    marker = request.node.get_closest_marker("reliability")
    if marker is not None:
        assert marker.args and marker.args[0] in RELIABILITY_KINDS, marker.args
        record_property("reliability", marker.args[0])


# `make test` runs the suite on two pytest-xdist workers (--dist loadgroup), a group at a time per worker: a
# test file's tests together (its module fixtures, e.g. one taxi run, are made once). A test that starts a
# Beam engine checks that none of the engine processes its worker's tests started is left
# (tests/pipeline/run/test_beam_engines.py: _ours), so engine tests of two workers may run side by side. A long
# test that shares no module fixture with its file's others names a group of its own
# (`@pytest.mark.xdist_group("...")`), so that the other worker may take it meanwhile.


# pytest-xdist hands the groups out in the order they were collected, so a long group collected late runs
# alone at the end while the other worker idles. The longest groups go first (longest processing time
# first), longest first, as measured by `make test` on a 2-core machine (2026-12-02: 465, 397, 297, 294, 280,
# 177, 168 and 142 s; the two cluster histories about 130 s each, 2026-12-03); the rest follow in their
# collection order.
LONG_GROUPS = ("tests/pipeline/run/test_beam_engines.py", "tests/kubeflow/test_spans.py", "tests/kubeflow/test_replay.py",
               "tests/kubeflow/test_operator_replay.py", "tests/pipeline/run/test_retraining.py",
               "tests/pipeline/run/test_run_taxi.py", "tests/components/example_gen/test_csv_chunks.py",
               "tests/kubeflow/test_beam_engines_compiled.py", "tests/kubeflow/test_cluster_history.py: vertex",
               "tests/kubeflow/test_cluster_history.py: kubeflow")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups into the test ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = Path(item.fspath)
        path = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.as_posix()
        item.add_marker(pytest.mark.xdist_group(path))
    rank = {group: index for index, group in enumerate(LONG_GROUPS)}
    items.sort(key=lambda item: rank.get(item.get_closest_marker("xdist_group").args[0], len(rank)))  # stable


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist (-p no:xdist) does not know the hook
def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    """The test ids a worker collected, in the controller: without their groups (pytest 9.2 made pytest-xdist's
    grouping a silent no-op, pytest-xdist #1386; pyproject.toml pins pytest below it) engine tests would run
    side by side, so stop."""
    if node.config.getvalue("dist") == "loadgroup" and any("@" not in nodeid for nodeid in ids):
        pytest.exit("pytest-xdist did not group the tests (--dist loadgroup): engine tests would run side by side; "
                    "see pytest-xdist #1386 and the pytest pin in pyproject.toml", returncode=3)


# A test leaves the temporary folder as it found it. The session's processes (pytest-xdist's workers, the
# runs, engines and trainers the tests start) get a temporary folder of their own through TMPDIR, and
# whatever is left in it when the session ends fails the session, named; pytest's own base temp
# (tmp_path) stays where it always is. A leak here is a leak on a user's machine: TFX's staged sdist of
# itself, Beam's staging lists, a Trainer's scratch model, each run after run.
_TEMP = pytest.StashKey[str]()
_LEFT = pytest.StashKey[list]()
_TIMELINE_ENV = "TFXD_TESTS_TIMELINE"  # beside the folder: when each test ran, to say which left what


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())  # a worker has its controller's
    _guard_the_network(config)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its controller set TMPDIR
        return
    private = tempfile.mkdtemp(prefix="tfxd-tests-")
    os.environ[_TIMELINE_ENV] = private + ".timeline"
    os.environ["TMPDIR"] = tempfile.tempdir = private
    config.stash[_TEMP] = private


@pytest.fixture(autouse=True)
def _timeline(request: pytest.FixtureRequest) -> Iterator[None]:
    start = time.time()
    yield
    timeline = os.environ.get(_TIMELINE_ENV)
    if timeline:
        with open(timeline, "a") as handle:
            handle.write(f"{start:.1f} {time.time():.1f} {request.node.nodeid}\n")


def _during(path: str, timeline: str) -> str:
    """The tests that ran when ``path`` last changed (its ctime), from the timeline."""
    changed = os.stat(path).st_ctime
    try:
        with open(timeline) as handle:
            spans = [line.rstrip("\n").split(" ", 2) for line in handle]
    except OSError:
        return ""
    tests = [test.split("@")[0] for start, end, test in spans if float(start) - 1 <= changed <= float(end) + 1]
    return f" (during {' or '.join(tests[:2])})" if tests else ""


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter's summary, which pytest_terminal_summary adds to
def pytest_sessionfinish(session: pytest.Session) -> None:
    private = session.config.stash.get(_TEMP, None)
    if private is None:
        return
    timeline = os.environ.get(_TIMELINE_ENV, "")
    # TensorFlow removes the autograph files it writes when its interpreter exits (autograph/pyct/loader.py,
    # atexit): a run without pytest-xdist checks while the interpreter that wrote them still runs
    left = [name + _during(os.path.join(private, name), timeline) for name in sorted(os.listdir(private))
            if not name.startswith("__autograph_generated_file")]
    shutil.rmtree(private, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.remove(timeline)
    if left:
        session.config.stash[_LEFT] = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# The network guard (tests/network_guard): each pytest process, and every Python process a test starts, may
# reach loopback and the suite's own test hosts only. Each pytest process has a file of its own, beside the
# temporary folder, where a refused connection is written; a test during whose setup, call or teardown a line
# appeared fails, naming the address, whether or not the code that dialled caught the refusal.
_GUARD_LOG = pytest.StashKey[str]()


def _guard_the_network(config: pytest.Config) -> None:
    handle, log = tempfile.mkstemp(prefix="tfxd-tests-network-", dir=os.environ["PYTEST_DEBUG_TEMPROOT"])
    os.close(handle)
    config.stash[_GUARD_LOG] = log
    os.environ[network_guard.LOG_ENV] = log
    guard_folder = os.path.dirname(network_guard.__file__)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (guard_folder, os.environ.get("PYTHONPATH"))))
    network_guard.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    with contextlib.suppress(KeyError, OSError):
        os.remove(config.stash[_GUARD_LOG])


@pytest.hookimpl(wrapper=True)
def _guarded_phase(item: pytest.Item) -> Iterator[None]:
    log = item.config.stash[_GUARD_LOG]
    before = os.path.getsize(log)
    result = yield
    with open(log, encoding="utf-8") as handle:
        handle.seek(before)
        refused = [line.split(" ", 1) for line in handle.read().splitlines()]
    if refused:
        pytest.fail("refused by the tests' guard (loopback and the suite's own test hosts only; no bucket path "
                    "as a local file: tests/network_guard): " + "; ".join(f"{where} (pid {pid})" for pid, where in refused), pytrace=False)
    return result


pytest_runtest_setup = pytest_runtest_call = pytest_runtest_teardown = _guarded_phase


@pytest.hookimpl(trylast=True)  # after --durations' table, so the last lines of a red CI's log name the leak
def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    left = config.stash.get(_LEFT, [])
    if left:
        terminalreporter.section("temporary files left behind", red=True)
        terminalreporter.line(f"the tests left {len(left)} entries in the temporary folder (the session fails):")
        for entry in left[:12]:
            terminalreporter.line(f"  {entry}")
