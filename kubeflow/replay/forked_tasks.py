"""Container tasks started from one process that has already imported TFX, instead of a fresh interpreter
each: every task of a compiled file runs `python -m tfxd.components.cluster_task ...` (keys.TASK_ENTRY_POINT,
around TFX's kubeflow_v2_run_executor), and importing that module (TensorFlow, Beam, TFX) is most of a small
task's time, ten times over in a replay of ten tasks. A Vertex file's ExampleGen runs TFX's own driver first
(`python -m tfx.orchestration.kubeflow.v2.file_based_example_gen.driver`, its preCacheCheck), which imports
the same libraries: it starts from the same process.

A preloader process (`python -m tfxd.kubeflow.replay.forked_tasks MODULE`) imports the entry point once, in
exactly the environment the launcher gives a task, then forks a child per task: the child takes the task's
working directory, log and arguments and runs the task's module (one of MODULES) as `python -m` runs it
(runpy, `__main__`), so it ends, exits and fails as a fresh process would. (The driver then finds tfxd
imported, which its container never imports: tfxd puts off some of TFX's, Beam's and TFMA's imports to their
first use, tfxd/deferred_imports.py, judged the libraries' own by tests/tfxd/test_deferred_imports.py, and
sets TensorFlow's variables, tfxd/tf_env.py: its logs and Keras, and the GCS read block, which the driver,
globbing and statting the span's files, never reads through.) A task whose environment differs from the
preloader's (what a module reads when it is imported would then differ) or whose command is another is
started fresh (launcher.py decides with ``Preloaded.takes``). The preloader serves one task at a time, as the
replay runs them, over its stdin and stdout (a JSON line each way); it ends when the replay closes its stdin.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
from typing import Any

from tfxd import keys

# the modules a task may run from the preloader: the entry point, which it imports, and TFX's ExampleGen
# driver, whose imports (TFX's orchestration, TensorFlow, Beam) the entry point's cover
MODULES = (keys.TASK_ENTRY_POINT, "tfx.orchestration.kubeflow.v2.file_based_example_gen.driver")


def container_temp(log_dir: str, name: str) -> str:
    """A container's own temporary folder (its TMPDIR), made under ``log_dir``: as a container has
    its own /tmp, what a task or pod leaves there (Beam's pipeline folder, TF's autograph files) goes with
    it. Its owner removes it when the container ends."""
    temp = os.path.join(log_dir, f"{name}.tmp")
    os.makedirs(temp, exist_ok=True)
    return temp


class Preloaded:
    """The preloader, seen from the replay: ``start`` runs a task in a forked child, a Popen-like handle back."""

    def __init__(self, env: dict[str, str], cwd: str, log: str, modules: tuple[str, ...] = MODULES) -> None:
        """The preloader imports ``modules[0]``; a task running any of ``modules`` may be forked from it."""
        self.env, self.cwd, self.modules = env, cwd, modules
        with open(log, "a", encoding="utf-8") as handle:  # its own errors, should it fail to import
            self.process = subprocess.Popen([sys.executable, "-m", __name__, modules[0]], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=handle, cwd=cwd, env=env)

    def takes(self, argv: list[str], env: dict[str, str], cwd: str) -> bool:
        """Whether a task with this command, environment and directory runs here as it would fresh."""
        return (runs_one_of(argv, self.modules) and env == self.env and cwd == self.cwd
                and self.process.poll() is None)

    def start(self, argv: list[str], log: str, temp: str) -> Task | None:
        """The task running in a child with ``temp`` as its temporary folder (None when the preloader is gone:
        start it fresh instead)."""
        try:
            self._send({"module": argv[2], "argv": argv[3:], "log": log, "temp": temp})
            answer = self._receive(None)
        except OSError:
            answer = None
        return Task(self, int(answer["pid"])) if answer and "pid" in answer else None

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def _receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The preloader's next line; None if none came within ``timeout`` or it ended."""
        stream = self.process.stdout
        assert stream is not None
        if timeout is not None and not select.select([stream], [], [], timeout)[0]:
            return None
        line = stream.readline()
        if not line:  # its end of output: the preloader is ending, so that poll() says so from here on
            self.process.wait()
            return None
        return json.loads(line)


class Task:
    """A forked task, with what the launcher uses of subprocess.Popen: wait, poll, terminate, kill."""

    def __init__(self, preloaded: Preloaded, pid: int) -> None:
        self.preloaded, self.pid = preloaded, pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            answer = self.preloaded._receive(timeout)
            if answer is None and self.preloaded.process.poll() is None:
                raise subprocess.TimeoutExpired(["forked task", str(self.pid)], timeout or 0)
            # the preloader ended under it (killed with the replay): the task's status is lost with it
            self.returncode = int(answer["exit"]) if answer else -signal.SIGKILL
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)


def runs_one_of(argv: list[str], modules: tuple[str, ...]) -> bool:
    """Whether ``argv`` is `python -m M ...` (this interpreter) for an M of ``modules``."""
    return len(argv) > 2 and argv[:2] == [sys.executable, "-m"] and argv[2] in modules


def _serve(module: str) -> None:
    """The preloader: import, then a child per request, its exit status reported when it ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the task (its own process) and the replay
    importlib.import_module(module)
    del sys.modules[module]  # each task runs its module afresh as __main__ (runpy warns about one already there)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _become(request["module"], request["argv"], request["log"], request["temp"], requests.fileno(),
                    answers.fileno())
            return
        answers.write((json.dumps({"pid": pid}) + "\n").encode())
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write((json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n").encode())
        answers.flush()


def _become(module: str, args: list[str], log: str, temp: str, requests: int, answers: int) -> None:
    """In the child: the task's process, as `TMPDIR=TEMP python -m MODULE ARGS >> LOG 2>&1 < /dev/null`
    starts it."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ["TMPDIR"] = tempfile.tempdir = temp  # tempfile read TMPDIR once, in the preloader
    output = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    for fd in {output, quiet, requests, answers} - {0, 1, 2}:
        os.close(fd)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _serve(sys.argv[1])
