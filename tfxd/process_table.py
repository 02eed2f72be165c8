"""Processes as Linux's /proc shows them, an unreaped child's exit status included: how tfxd tells how an
SDK worker of its pool ended (pipeline/run/sdk_worker_pool.py), which Beam never says. The pool reaps a
worker only when the runner stops it, so one that ended on its own stays a zombie of the pool, its name
(WORKER_NAME and its worker id, which it gave itself) and its wait status readable here."""

from __future__ import annotations

import os
import time

WORKER_NAME = "sdk "  # a pool's worker's name (/proc/PID/comm): this and its worker id (the kernel keeps 15 bytes)
_COMM_BYTES = 15


def returncode(status: int) -> int:
    """A wait status (as /proc reports an unreaped child's) as Popen's return code."""
    return -(status & 0x7F) if status & 0x7F else status >> 8


def _stat_fields(pid: int, of: int | None = None) -> tuple[str, list[str]] | None:
    """(name, the fields after it) of /proc/PID/stat, or of thread ``pid`` of process ``of``; None once it
    is gone. fields[0] is the state (field 3 of proc(5)), fields[1] the parent, fields[2] the process
    group, the last (field 52) the exit code as waitpid reports it."""
    path = f"/proc/{pid}/stat" if of is None else f"/proc/{of}/task/{pid}/stat"
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head, tail = handle.read().rsplit(")", 1)
        return head.split("(", 1)[1], tail.split()  # the name: the process's comm, kept while it is a zombie
    except (OSError, IndexError, ValueError):
        return None  # ended, or ended while read


def stat(pid: int) -> tuple[str, str, int, int] | None:
    """A process as /proc/PID/stat has it: (state, name, parent's pid, wait status; 0 while alive); None
    once it is gone."""
    found = _stat_fields(pid)
    if found is None or len(found[1]) < 2:
        return None
    name, fields = found
    try:
        return fields[0], name, int(fields[1]), int(fields[-1]) if len(fields) >= 50 else 0
    except ValueError:
        return None


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def children(parent: int) -> dict[int, tuple[str, str, int]]:
    """The processes whose parent is ``parent``: pid -> (state, name, wait status; 0 while alive)."""
    found = {}
    for pid in _pids():
        if (seen := stat(pid)) is not None and seen[2] == parent:
            found[pid] = (seen[0], seen[1], seen[3])
    return found


def running_in_group(group: int) -> list[int]:
    """The processes of process group ``group`` that have not ended: a zombie, which has closed its files,
    is not one of them, unless a thread of it still runs. Linux shows a thread group's leader as a zombie
    once its own thread has exited, while the others go on (exiting, after a SIGKILL) with the files they
    share still open: the listening socket of a process killed with its threads closes with its last."""
    return [pid for pid in _pids() if (found := _stat_fields(pid)) is not None and len(found[1]) > 2
            and found[1][2] == str(group) and (found[1][0] != "Z" or _a_thread_runs(pid))]


def _a_thread_runs(pid: int) -> bool:
    """Whether a thread of process ``pid`` has not ended (/proc/PID/task: one entry per thread)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any((found := _stat_fields(int(tid), pid)) is not None and found[1] and found[1][0] != "Z"
               for tid in threads)


def worker_name(worker_id: str) -> str:
    """The name a pool's worker gives itself, as /proc keeps it."""
    return (WORKER_NAME + worker_id).encode()[:_COMM_BYTES].decode(errors="ignore")


def ended_worker(worker_id: str, within: float) -> tuple[int, int] | None:
    """(pid, return code) of the pool's worker ``worker_id`` once it has ended, a pool being a child of this
    process; looked for until ``within`` seconds have passed (a process's sockets close as it exits,
    moments before /proc shows it ended). None where no pool of this process has such a worker."""
    deadline = time.monotonic() + within
    name = worker_name(worker_id)
    while True:
        for pool in children(os.getpid()):
            for pid, (state, seen, status) in children(pool).items():
                if seen == name and state == "Z":
                    return pid, returncode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)
