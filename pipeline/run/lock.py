"""One `tfxd run` at a time per pipeline root: an exclusive flock on a file beside ML Metadata's
SQLite database, held for the whole run. The kernel drops the lock when the process ends, however it
ends (exit, Ctrl-C, SIGKILL, OOM), so a crashed run never leaves a stale lock behind.

A bucket root is claimed by one machine's ML Metadata store: TFX writes each output under
`<root>/pipeline/<component>/<key>/<execution id>`, numbered by that store, so a second machine's runs under
the same root would write over the first's artifacts. Its first run writes an owner object naming the store
(`<root>/.tfxd-store`), created only if absent, so that of machines starting at once exactly one owns
the root; a run from another store is refused before anything is written."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import uuid
from collections.abc import Iterator

from tfxd.files import create_once, is_uri, join, local_state, write_atomic

LOCK_NAME = "tfxd-run.lock"
STORE_ID = "store-id"  # this machine's store of a bucket root, in its local state folder
OWNER = ".tfxd-store"  # on the bucket: the store that numbers the root's artifacts


class RunLocked(Exception):
    """Another process holds the root's lock; names it and the lock file."""

    def __init__(self, root: str, path: str, pid: str) -> None:
        super().__init__(f"another tfxd run (pid {pid}) is using {root}; wait for it or stop it "
                         f"(lock file: {path})")
        self.path = path
        self.pid = pid


class RootClaimed(Exception):
    """A bucket root whose artifacts another machine's ML Metadata store numbers."""

    def __init__(self, root: str, owner: str, mine: str) -> None:
        super().__init__(f"{root} is the root of another machine's runs ({owner}); this machine's ML Metadata "
                         f"({mine}) would number its artifacts from 1 again and write over that machine's: run "
                         "there, or give this machine a root of its own (--set root=gs://.../another-folder); if "
                         f"that store is gone for good, delete {join(root, OWNER)} and the root's artifacts are "
                         "this machine's to write over")


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
        if is_uri(root):
            _claim(root)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)  # a free lock names no one
    finally:
        os.close(fd)  # releases the lock if this process held it


def holder(root: str) -> str | None:
    """The pid of the run holding ``root``'s lock now, or None when no run is going on."""
    try:
        fd = os.open(lock_path(root), os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
    finally:
        os.close(fd)  # releases it where this process took it
    return None


def _claim(root: str) -> None:
    """Make this machine's store the owner of bucket ``root``, or raise RootClaimed if another one is. Of
    machines starting their first run at once, one creates the owner object and the others read it."""
    mine_path = os.path.join(local_state(root), STORE_ID)
    if not os.path.exists(mine_path):
        write_atomic(mine_path, f"{uuid.uuid4().hex} {socket.gethostname()}:{local_state(root)}\n")
    with open(mine_path, encoding="utf-8") as handle:
        mine = handle.read().strip()
    owner = create_once(join(root, OWNER), mine + "\n").strip()
    if owner.split()[0] != mine.split()[0]:
        raise RootClaimed(root, owner.split(maxsplit=1)[-1], mine.split(maxsplit=1)[-1])
