"""Which replica a distributed training's failure is about. When a peer stops answering (frozen, cut off,
preempted), it is a healthy replica that fails: TensorFlow's coordination service sees the peer's
heartbeats stop and aborts the others' collectives, and their processes exit with an error naming the
peer (tsl/distributed_runtime/coordination/coordination_service.cc: "Task /job:worker/replica:0/task:1
heartbeat timeout"; "Stopping coordination service as the following tasks are unhealthy (stopped sending
heartbeats): ..."). Blaming the process that exited first would send the user to the wrong replica's log
(or pod); this reads the reporter's log for the peer TensorFlow names."""

from __future__ import annotations

import re
from dataclasses import dataclass

# TensorFlow's words for a peer it lost, each with the task it names
_LOST = (re.compile(r"Task /job:(?P<job>[a-z_]+)/replica:\d+/task:(?P<index>\d+) heartbeat timeout"),
         re.compile(r"following tasks are unhealthy \(stopped sending heartbeats\):\s*"
                    r"/job:(?P<job>[a-z_]+)/replica:\d+/task:(?P<index>\d+)"))
TAIL_BYTES = 256 * 1024  # the end of a log: where a failing process writes why


@dataclass(frozen=True)
class Lost:
    """A peer TensorFlow named as lost: its replica name (`worker-1`, TF_CONFIG's task type and index) and
    TensorFlow's line saying so."""

    replica: str
    said: str


def lost_peer(log_text: str, reporter: str) -> Lost | None:
    """The last peer other than ``reporter`` that TensorFlow says it lost in ``reporter``'s log, or None."""
    found: tuple[int, Lost] | None = None
    for pattern in _LOST:
        for match in pattern.finditer(log_text):
            replica = f"{match['job']}-{match['index']}"
            if replica != reporter and (found is None or match.start() > found[0]):
                found = (match.start(), Lost(replica, _sentence(log_text, match)))
    return found[1] if found else None


def lost_peer_in(log_path: str, reporter: str) -> Lost | None:
    """lost_peer of the end of the log file at ``log_path`` (None when it cannot be read)."""
    try:
        with open(log_path, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return lost_peer(text, reporter)


def _sentence(text: str, match: re.Match[str]) -> str:
    """TensorFlow's words from ``match`` to the end of its sentence (a full stop, or the end of the line the
    match ends on), on one line."""
    ends = [end for end in (text.find(". ", match.end()), text.find("\n", match.end())) if end >= 0]
    return " ".join(text[match.start():min(ends) if ends else len(text)].split())


def process_state(pid: int) -> str | None:
    """What Linux says a live process is doing, in words, where it matters for a peer TensorFlow lost:
    'was frozen (stopped by a signal)' for a stopped one; None for a running or sleeping one, or one gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return "was frozen (stopped by a signal)" if state in ("T", "t") else None
