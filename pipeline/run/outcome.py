"""How a run ends, in words a person can act on: its id, the failure that names the component and
the log, and the root cause picked out of the long remote tracebacks Beam and TensorFlow wrap errors
in. `tfxd run` and `tfxd replay` both end this way."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shutil
from dataclasses import dataclass
from typing import Any

from tfxd import keys, stops
from tfxd.files import local_state


def new_run_id() -> str:
    """A run's id: its start time, sortable, unique to the microsecond."""
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")


class RunFailed(Exception):
    """A component failed; names it and the log with the whole story."""

    def __init__(self, component: str, reason: str, log: str) -> None:
        super().__init__(f"{component} failed: {reason}\n    full log: {log}")
        self.component = component
        self.log = log


class RunInterrupted(Exception):
    """SIGINT (Ctrl-C) or SIGTERM stopped the run; what the interrupted component wrote is never recorded
    as done. ``exit_status``: 130 or 143, as for a process the signal ended (tfxd.stops)."""

    def __init__(self, component: str | None, resumes_training: bool, log: str | None,
                 signum: int | None = None) -> None:
        where = (f" during {component}; its unfinished output was removed (abandoned in ML Metadata)"
                 if component else "")
        resume = ", the Trainer from its last backed-up step" if resumes_training else ""
        super().__init__(f"interrupted by {stops.name(signum)}{where}: run the same command again to resume "
                         f"(finished components are reused from the cache{resume})"
                         + (f"\n    full log: {log}" if log else ""))
        self.component = component
        self.exit_status = stops.exit_status(signum)


# ExampleGen's NoNewDataFound under `data.on_no_new_data: skip` (components/example_gen/executor.py),
# found in the text of whatever wrapped it (TFX, Beam, a task's log)
_NO_NEW_DATA = re.compile(r"no new data: .*?; nothing to train \(data\.on_no_new_data: skip\)")


def skipped_for_no_new_data(text: str) -> str | None:
    """The one line a run stopped with because there was no new data to train on, or None."""
    found = _NO_NEW_DATA.search(text)
    return found.group(0) if found else None


@dataclass(frozen=True)
class GateStop:
    """Why a validation gate stopped a run: the gate (drift or skew), its message, and its record (span,
    previous_span, columns: each column's distance, threshold and measure, beyond: those past it)."""

    gate: str
    message: str
    record: dict


def with_gate_stop(gates: dict[str, Any], stopped: GateStop | None) -> dict[str, Any]:
    """The gates' records ({drift, skew}), the one of the gate that ``stopped`` the run from its verdict (a
    failed execution published none)."""
    return {**gates, stopped.gate: stopped.record} if stopped else gates


def gate_stop(log: str | None) -> GateStop | None:
    """The verdict of the validation gate that stopped a run, from the line ExampleValidator logged
    (keys.GATE_VERDICT) in the ``log`` file (a run's, a task's), or None."""
    verdict = None
    try:
        with open(log or "", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                at = line.find(keys.GATE_VERDICT)
                if at >= 0:
                    with contextlib.suppress(ValueError):
                        verdict = json.loads(line[at + len(keys.GATE_VERDICT):])
    except OSError:
        return None
    if not isinstance(verdict, dict) or verdict.get("gate") not in ("drift", "skew"):
        return None
    record = {key: value for key, value in verdict.items() if key not in ("gate", "message")}
    return GateStop(verdict["gate"], str(verdict.get("message", "")), record)


# a line that starts an error report: `SomeError: message`, `pkg.mod.SomeException: ...`, `... Exit: ...`
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Found|Failed|Exit)): (.+)")
REASON_LIMIT = 2000


def root_cause(text: str) -> str | None:
    """The last `SomeError: message` line of ``text`` (an exception's message, a task's log) with the
    indented lines that continue it: under Beam's and TensorFlow's wrapping, that is the one that
    explains. None when ``text`` has no such line."""
    lines = text.strip().splitlines()
    starts = [i for i, line in enumerate(lines) if _ERROR_LINE.match(line.strip())]
    if not starts:
        return None
    last = starts[-1]
    return shortened("\n".join([lines[last].strip(), *[line for line in lines[last + 1:] if line.startswith(" ")]]))


def shortened(reason: str) -> str:
    """A reason as a message shows it: without Beam's `[while running ...]` suffix, at most REASON_LIMIT
    characters."""
    reason = reason.split(" [while running")[0].strip()
    return reason if len(reason) < REASON_LIMIT else reason[:REASON_LIMIT] + " ..."


_NO_SPACE = re.compile(r"\[Errno 28\]|No space left on device|ENOSPC|database or disk is full")


def disk_full(text: str, root: str) -> str | None:
    """The reason a run failed, in words, when the disk it writes to filled up (a write failed with
    ENOSPC, whatever wrapped it); None otherwise. Names ``root`` and the space free there now."""
    if not _NO_SPACE.search(text):
        return None
    where = local_state(root)  # for a bucket root, the local disk its run wrote to
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    usage = shutil.disk_usage(where)
    return (f"no space left on the device under {root} ({_size(usage.total)} in all, {_size(usage.free)} free as "
            "the run stopped); nothing the failed component wrote was published. Free some space, or set `root` to "
            "a disk with room, and run the same command again")


def _size(count: int) -> str:
    size = float(count)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TB"
