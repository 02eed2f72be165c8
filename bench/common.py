"""What every benchmark shares: the venv's tools, statistics, a process-tree memory sampler and
the taxi example's Transform output (made once per `make bench` through the public CLI)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TFXD = os.path.join(os.path.dirname(sys.executable), "tfxd")
TAXI_SPEC = os.path.join(REPO, "examples", "taxi.yaml")
SCRATCH = os.environ.get("TFXD_BENCH_SCRATCH") or os.path.join(tempfile.gettempdir(), "tfxd-bench")


def stats(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def scratch(name: str, fresh: bool = True) -> str:
    """A folder under the bench scratch dir (emptied first when ``fresh``)."""
    path = os.path.join(SCRATCH, name)
    if fresh:
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path, exist_ok=True)
    return path


class _TreeMemory(threading.Thread):
    """Samples the summed RSS of a process and its descendants every 0.1 s; keeps the peak."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.done.is_set():
            total = 0
            try:
                for process in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                        total += process.memory_info().rss
            except psutil.NoSuchProcess:
                return
            self.peak = max(self.peak, total)
            self.done.wait(0.1)


def measure(command: Sequence[str], cwd: str | None = None, env: dict[str, str] | None = None,
            log: str | None = None) -> dict[str, float]:
    """Run ``command``; its wall seconds, the peak summed RSS (MB) of its process tree and when it started
    (``started_at``, seconds since the epoch, as ML Metadata's times count them).
    Output goes to ``log`` (or nowhere); a failure raises with the log's tail. Its temporary files go
    to a folder of its own, removed afterwards: what either side leaves (TFX's staged sdist of itself,
    Beam's staging lists) neither piles up nor fills the disk over a long bench."""
    out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115
    temp = tempfile.mkdtemp(prefix="measure-", dir=scratch("tmp", fresh=False))
    env = {**(os.environ if env is None else env), "TMPDIR": temp}
    started_at, start = time.time(), time.perf_counter()
    try:
        process = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        sampler = _TreeMemory(process.pid)
        sampler.start()
        code = process.wait()
        seconds = time.perf_counter() - start
        sampler.done.set()
        sampler.join()
    finally:
        if log:
            out.close()
        shutil.rmtree(temp, ignore_errors=True)
    if code != 0:
        tail = ""
        if log:
            with open(log) as handle:
                tail = handle.read()[-3000:]
        raise RuntimeError(f"{' '.join(command)} exited with {code}\n{tail}")
    return {"seconds": seconds, "peak_rss_mb": sampler.peak / 2**20, "started_at": started_at}


def run_summary(root: str) -> dict:
    """The summary.json `tfxd run` wrote for its latest run under ``root`` (runs/<run id>/)."""
    runs = os.path.join(root, "runs")
    newest = max(os.listdir(runs), key=lambda run: os.path.getmtime(os.path.join(runs, run)))
    with open(os.path.join(runs, newest, "summary.json")) as handle:
        return json.load(handle)


_TRANSFORM: dict[str, str] = {}


def taxi_transform() -> dict[str, str]:
    """The taxi example run up to Transform, once per bench invocation (into a fresh folder): the URIs
    of its transform graph and transformed examples."""
    if not _TRANSFORM:
        root = scratch("taxi-transform")
        subprocess.run([TFXD, "run", TAXI_SPEC, "--to", "Transform", "--set", f"root={root}"], check=True,
                       cwd=REPO, stdout=subprocess.DEVNULL)
        artifacts = run_summary(root)["artifacts"]
        _TRANSFORM.update(transform_graph=artifacts["transform_graph"],
                          transformed_examples=artifacts["transformed_examples"])
    return dict(_TRANSFORM)


RESULT = "RESULT "  # the line a worker process prints its measurement on, as JSON


def print_result(value: dict) -> None:
    """A worker's answer to its driver, on stdout."""
    print(RESULT + json.dumps(value), flush=True)


def read_result(output: str) -> dict | None:
    """The last result a worker printed in ``output``, or None."""
    lines = [line for line in output.splitlines() if line.startswith(RESULT)]
    return json.loads(lines[-1][len(RESULT):]) if lines else None


def run_worker(script: str, args: Sequence[str], log: str, timeout_s: float) -> dict:
    """``python script worker *args`` in a fresh interpreter (stderr to ``log``): the result it printed;
    a failure, or no result, raises with the log's tail."""
    command = [sys.executable, os.path.abspath(script), "worker", *args]
    with open(log, "w+") as err:
        done = subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout_s)
        err.seek(0)
        tail = err.read()[-3000:]
    result = read_result(done.stdout)
    if done.returncode != 0 or result is None:
        raise RuntimeError(f"{' '.join(args)} exited with {done.returncode}; its log: {log}\n{tail}")
    return result


def md_ratio(ratio: dict[str, float], digits: int = 2) -> str:
    return f"{ratio['median']:.{digits}f} (min {ratio['min']:.{digits}f}, max {ratio['max']:.{digits}f})"


def target(figure: str, wanted: str, met: bool) -> dict:
    """One target a figure is judged by, as a result records it: what `bench/run.py --check` reads."""
    return {"figure": figure, "wanted": wanted, "met": bool(met)}


def judged(recorded: dict) -> str:
    """A target's cell in RESULTS.md: what was wanted, and whether this run met it."""
    return f"{recorded['wanted']}: {'met' if recorded['met'] else 'NOT met'}"
