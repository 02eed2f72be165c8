"""One `tfxd run` at a time per pipeline root: an exclusive flock on a file beside ML Metadata's
SQLite database, held for the whole run. The kernel drops the lock when the process ends, however it
ends (exit, Ctrl-C, SIGKILL, OOM), so a crashed run never leaves a stale lock behind."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from tfxd.files import local_state

LOCK_NAME = "tfxd-run.lock"


class RunLocked(Exception):
    """Another process holds the root's lock; names it and the lock file."""

    def __init__(self, root: str, path: str, pid: str) -> None:
        super().__init__(f"another tfxd run (pid {pid}) is using {root}; wait for it or stop it "
                         f"(lock file: {path})")
        self.path = path
        self.pid = pid


def lock_path(root: str) -> str:
    return os.path.join(local_state(root), LOCK_NAME)


@contextlib.contextmanager
def hold(root: str) -> Iterator[str]:
    """Hold ``root``'s run lock for the block (yields the lock file's path), or raise RunLocked at once.
    A bucket root's lock is in this machine's state folder for it (tfxd.files.local_state): it keeps this
    machine's runs apart, as its ML Metadata store is this machine's too."""
    path = lock_path(root)
    if not os.path.exists(path):
        os.makedirs(local_state(root), exist_ok=True)
    # non-inheritable (PEP 446): a worker process left behind by a killed run does not keep the lock
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise RunLocked(root, path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # a free lock names no one
    finally:
        os.close(fd)  # releases the lock if this process held it
