"""A stop asked for by a signal: Ctrl-C (SIGINT) in a terminal, SIGTERM from Kubernetes evicting a pod,
Vertex preempting a replica, `timeout` or systemd. Both end a run the same way, as an interruption
(what had begun is recorded CANCELED, its unfinished outputs removed), and tfxd's exit status tells
which: 130 for SIGINT, 143 for SIGTERM, as a shell reports a process those signals ended.

A signal raises Stopped (a KeyboardInterrupt, so everything that cleans up after Ctrl-C does so here
too) at once, except while the Trainer fits a model (`deferring`): then it is noted, and the Trainer
backs up its training state at the next step boundary before it raises (trainer_module/callbacks.py),
so that the retried Trainer resumes from that step. A second signal does not wait.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """The run was stopped by ``signum``.

    Also made from its own message with more after the signal's name: Apache Beam re-raises what a step
    raised as the same type with the step named in the message (or, where that type cannot be made so, as a
    RuntimeError, which TFX records as the component failing rather than being interrupted)."""

    def __init__(self, signum: int | str) -> None:
        if isinstance(signum, str):
            message, signum = signum, signal.Signals[signum.split(" ", 1)[0]]
        else:
            message = signal.Signals(signum).name
        super().__init__(message)
        self.signum = int(signum)


class _State:
    requested: int | None = None  # the first signal received
    deferring = False


def requested() -> int | None:
    """The signal that asked to stop, or None."""
    return _State.requested


def exit_status(signum: int | None) -> int:
    """The exit status of a process the signal ended: 128 + its number (130 SIGINT, 143 SIGTERM)."""
    return 128 + (signum or signal.SIGINT)


def name(signum: int | None) -> str:
    return signal.Signals(signum or signal.SIGINT).name


def _handler(signum: int, frame) -> None:
    first = _State.requested is None
    if first:
        _State.requested = signum
    if first and _State.deferring:
        return  # the Trainer stops at its next step boundary
    raise Stopped(signum)


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """SIGINT and SIGTERM raise Stopped in this (main) thread while inside; elsewhere only the main
    thread receives signals, so this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _State.requested = None  # a new run in this process starts with no stop asked for
    previous = {signum: signal.signal(signum, _handler) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferring() -> Iterator[None]:
    """While inside (the Trainer's fit), a stop waits for ``check()`` at the next step boundary. Installs
    the handlers itself where nothing has (a Trainer in a container of its own, on Kubeflow or Vertex)."""
    with handling() if signal.getsignal(signal.SIGTERM) is not _handler else contextlib.nullcontext():
        _State.deferring = True
        try:
            yield
        finally:
            _State.deferring = False
        check()  # a stop that came after the last step boundary


def check() -> None:
    """Raise Stopped when a signal asked to stop."""
    if _State.requested is not None:
        raise Stopped(_State.requested)
