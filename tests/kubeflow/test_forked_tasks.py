"""Replay's tasks forked from a preloader (kubeflow/replay/forked_tasks.py) run as `python -m MODULE ARGS`
run fresh: the same arguments, directory, environment and log, a temporary folder of its own (as the
launcher gives a fresh one through TMPDIR), the same exit status for an exit, an uncaught exception and a
signal, whether the module is the one the preloader imported or another it may run (TFX's ExampleGen
driver beside the entry point); a task whose environment differs is not taken."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from tfxd.kubeflow.replay.forked_tasks import Preloaded

TASK = '''
import json, os, sys, tempfile, time

if __name__ == "__main__":  # as TFX's entry point: the preloader imports it, each task runs it
    if sys.argv[1] == "sleep":
        print("sleeping", flush=True)
        time.sleep(60)
    if sys.argv[1] == "raise":
        raise ValueError("the task failed")
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "flag": os.environ.get("TFXD_TEST_FLAG"),
                      "stdin": sys.stdin.read(), "tmpdir": os.environ.get("TMPDIR"),
                      "temp": tempfile.mkdtemp(prefix="task-")}))
    sys.exit(int(sys.argv[2]))
'''


@pytest.fixture
def preloaded(tmp_path):
    (tmp_path / "tfxd_forked_task.py").write_text(TASK)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "TFXD_TEST_FLAG": "on"}
    (tmp_path / "tfxd_forked_driver.py").write_text(TASK.replace("as TFX's entry point", "as TFX's driver"))
    preloader = Preloaded(env, str(tmp_path), str(tmp_path / "preloader.log"),
                          modules=("tfxd_forked_task", "tfxd_forked_driver"))
    yield preloader, env
    preloader.close()
    assert preloader.process.poll() is not None  # closing its stdin ends it


def _argv(*args: str, module: str = "tfxd_forked_task") -> list[str]:
    return [sys.executable, "-m", module, *args]


def test_a_forked_task_sees_what_a_fresh_one_sees_and_exits_with_its_status(preloaded, tmp_path):
    preloader, env = preloaded
    assert preloader.takes(_argv("echo", "3"), env, str(tmp_path))
    (tmp_path / "task.tmp").mkdir()
    task = preloader.start(_argv("echo", "3"), str(tmp_path / "task.log"), str(tmp_path / "task.tmp"))
    assert task is not None and task.pid != preloader.process.pid
    assert task.wait() == 3 and task.poll() == 3
    seen = json.loads((tmp_path / "task.log").read_text())
    assert seen["argv"][0] == str(tmp_path / "tfxd_forked_task.py") and seen["argv"][1:] == ["echo", "3"]
    assert seen["cwd"] == str(tmp_path) and seen["flag"] == "on"
    assert seen["stdin"] == ""  # not the preloader's requests
    # its temporary folder, for tempfile (which read TMPDIR once, in the preloader) and for its children
    assert seen["tmpdir"] == str(tmp_path / "task.tmp") and os.path.dirname(seen["temp"]) == seen["tmpdir"]

    failed = preloader.start(_argv("raise"), str(tmp_path / "failed.log"), str(tmp_path))
    assert failed is not None and failed.wait() == 1
    assert "ValueError: the task failed" in (tmp_path / "failed.log").read_text()

    # the other module: run as its own __main__, from the preloader that imported only the first
    driver = _argv("echo", "5", module="tfxd_forked_driver")
    assert preloader.takes(driver, env, str(tmp_path))
    task = preloader.start(driver, str(tmp_path / "driver.log"), str(tmp_path / "task.tmp"))
    assert task is not None and task.wait() == 5
    seen = json.loads((tmp_path / "driver.log").read_text())
    assert seen["argv"] == [str(tmp_path / "tfxd_forked_driver.py"), "echo", "5"] and seen["flag"] == "on"


def test_a_stopped_task_ends_by_its_signal_and_the_next_task_still_runs(preloaded, tmp_path):
    preloader, _ = preloaded
    task = preloader.start(_argv("sleep"), str(tmp_path / "sleep.log"), str(tmp_path))
    assert task is not None and task.poll() is None
    log = tmp_path / "sleep.log"
    while not log.exists() or "sleeping" not in log.read_text():
        time.sleep(0.1)
    task.terminate()
    assert task.wait(timeout=30) == -signal.SIGTERM
    after = preloader.start(_argv("echo", "0"), str(tmp_path / "after.log"), str(tmp_path))
    assert after is not None and after.wait() == 0


def test_a_task_with_another_environment_directory_or_command_is_started_fresh(preloaded, tmp_path):
    preloader, env = preloaded
    assert not preloader.takes(_argv("echo", "0"), {**env, "TF_CONFIG": "{}"}, str(tmp_path))
    assert not preloader.takes(_argv("echo", "0"), env, str(tmp_path / "elsewhere"))
    assert not preloader.takes([sys.executable, "-m", "another_module"], env, str(tmp_path))
