"""tfxd.quick_exit: a process that imports it freezes its objects at exit, so that Python's last
collections skip them (the command line's process and, through Beam's --beam_plugin, each worker process
the DirectRunner starts: apache_beam/runners/worker/sdk_worker_main.py _import_beam_plugins)."""

from __future__ import annotations

import os
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from tfxd.direct_runner import QUICK_EXIT, direct_args

# prints how many objects are frozen once the atexit handlers registered after it have run (atexit runs
# the last registered first)
FROZEN_AT_EXIT = "import atexit, gc, sys; atexit.register(lambda: sys.stderr.write(f'frozen {gc.get_freeze_count()}'))"


def _frozen_at_exit(code: str) -> int:
    result = subprocess.run([sys.executable, "-c", f"{FROZEN_AT_EXIT}\n{code}"], capture_output=True, text=True,
                            timeout=120)
    return int(result.stderr.rsplit("frozen ", 1)[1])


def test_importing_it_freezes_the_objects_at_exit():
    assert _frozen_at_exit("import tfxd.quick_exit") > 1_000
    assert _frozen_at_exit("import tfxd") == 0  # the rest of tfxd leaves exit to Python


def test_the_command_lines_process_exits_frozen():
    code = "sys.argv = ['tfxd', '--help']\nfrom tfxd.cli.main import main\nmain()"
    assert _frozen_at_exit(code) > 10_000


def _in_worker(_: int) -> tuple[bool, bool]:
    """(is this another process, has it imported tfxd.quick_exit)."""
    return os.getpid() != int(os.environ["TFXD_TEST_PARENT"]), "tfxd.quick_exit" in sys.modules


@pytest.mark.parametrize("plugin", [True, False])
def test_beam_imports_it_in_each_worker_process(plugin, monkeypatch):
    monkeypatch.setenv("TFXD_TEST_PARENT", str(os.getpid()))  # worker processes inherit the environment
    args = direct_args("multi_processing", 2)
    assert QUICK_EXIT in args
    if not plugin:
        args.remove(QUICK_EXIT)
    with beam.Pipeline(argv=args) as pipeline:
        found = pipeline | beam.Create([1, 2, 3, 4]) | beam.Map(_in_worker) | beam.Distinct()
        assert_that(found, equal_to([(True, plugin)]))


ENDED = """
import atexit, os, sys, threading, time
class Cleared:
    def __del__(self, write=os.write):  # as Python clears sys.modules at exit (os may be cleared first)
        write(2, b"cleared\\n")
def last_at_exit():  # registered first, run last: nothing else can hold the object once it is a module
    sys.stderr.write("atexit ran\\n")
    sys.modules["tfxd_test_cleared"] = Cleared()
def later(path=sys.argv[1]):
    time.sleep(0.3)
    with open(path, "w") as out:
        out.write("joined")
threading.Thread(target=later).start()  # a thread Python waits for at exit
atexit.register(last_at_exit)
sys.argv = ["tfxd", "validate", sys.argv[2]]
from tfxd.cli.main import main
main()
"""


@pytest.mark.parametrize("quick", [True, False])
def test_the_command_line_ends_as_python_would_without_clearing_its_modules(tmp_path, quick):
    """The bite: the same script with main's exit left to Python clears the module (its object's __del__)."""
    code = ENDED if quick else ENDED.replace("main()", "from tfxd.cli.main import cli\ncli(prog_name='tfxd')")
    joined = tmp_path / "joined.txt"
    done = subprocess.run([sys.executable, "-c", code, str(joined), str(tmp_path / "missing.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr  # validate's status for a spec it cannot read
    assert "missing.yaml" in done.stdout + done.stderr  # what it printed reached its streams
    assert joined.read_text() == "joined" and "atexit ran" in done.stderr
    assert ("cleared" in done.stderr) is not quick


def test_a_message_as_the_status_is_printed_and_ends_with_status_1():
    code = "from tfxd import quick_exit\nprint('before', end='')\nquick_exit.ended('a message')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (1, "before", "a message\n")
