"""A stop asked for by a signal: Ctrl-C (SIGINT) in a terminal, SIGTERM from Kubernetes evicting a pod,
Vertex preempting a replica, `timeout` or systemd. Both end a run the same way, as an interruption
(what had begun is recorded CANCELED, its unfinished outputs removed), and tfxd's exit status tells
which: 130 for SIGINT, 143 for SIGTERM, as a shell reports a process those signals ended.

A signal raises Stopped (a KeyboardInterrupt, so everything that cleans up after Ctrl-C does so here
too) at once, except while the Trainer fits a model (`deferring`): then it is noted, and the Trainer
backs up its training state at the next step boundary before it raises (trainer_module/callbacks.py),
so that the retried Trainer resumes from that step. A second signal does not wait.

A process of a cluster (a Trainer replica, a Trainer task in a container of its own) ends within a bound:
with a ``deadline``, the first signal also starts a watch that ends the process that many seconds later
wherever it is (a step that does not return, a collective waiting on a peer that is gone, a parameter
server's join), saying so, with the signal's exit status. Kubernetes sends SIGKILL 30 s after SIGTERM
unless a pod says otherwise; DEADLINE_SECONDS keeps tfxd's processes inside STOP_SECONDS, well within it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
STOP_SECONDS = 20  # a tfxd process on a cluster ends within this of SIGTERM
DEADLINE_SECONDS = 15  # when the watch ends it: the rest is the margin for the process's own exit
GRACE_SECONDS = 30  # the termination grace period tfxd asks for its pods (Kubernetes' default too)


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
    deadline: float | None = None  # seconds from the first signal to the end of the process, at most


def requested() -> int | None:
    """The signal that asked to stop, or None."""
    return _State.requested


def exit_status(signum: int | None) -> int:
    """The exit status of a process the signal ended: 128 + its number (130 SIGINT, 143 SIGTERM)."""
    return 128 + (signum or signal.SIGINT)


def name(signum: int | None) -> str:
    return signal.Signals(signum or signal.SIGINT).name


def by_signal(returncode: int) -> bool:
    """Whether a process was ended by a signal (preempted, evicted, out of memory, stopped from outside),
    from its return code as Popen gives it (negative) or as a shell or the kubelet reports it (128 + the
    signal): the exit codes the Training Operator retries (training-operator v1.9, pkg/util/train:
    IsRetryableExitCode, code >= 128; tests/conformance/test_training_operator.py holds it to that)."""
    return returncode < 0 or returncode >= 128


def ended(returncode: int) -> str:
    """How a process ended, in words, from its return code as Popen gives it (negative: the signal): 'was
    killed by signal 9 (SIGKILL: out of memory, or stopped from outside)', 'exited with code 1'."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        signame = signal.Signals(-returncode).name
    except ValueError:
        signame = "unknown signal"
    hint = ": out of memory, or stopped from outside" if -returncode == signal.SIGKILL else ""
    return f"was killed by signal {-returncode} ({signame}{hint})"


def _handler(signum: int, frame: FrameType | None) -> None:
    first = _State.requested is None
    if first:
        _State.requested = signum
        if _State.deadline is not None:
            _watch(signum, _State.deadline)
    if first and _State.deferring:
        return  # the Trainer stops at its next step boundary
    raise Stopped(signum)


def _watch(signum: int, deadline: float) -> None:
    """End this process ``deadline`` seconds from now, unless it has ended by then."""
    def end() -> None:
        time.sleep(deadline)
        sys.stderr.write(f"tfxd: still running {deadline:g} s after {name(signum)} (a step or a collective that "
                         f"does not return): ending now, exit status {exit_status(signum)}\n")
        sys.stderr.flush()
        os._exit(exit_status(signum))

    threading.Thread(target=end, name="tfxd-stop-deadline", daemon=True).start()


@contextlib.contextmanager
def handling(deadline: float | None = None) -> Iterator[None]:
    """SIGINT and SIGTERM raise Stopped in this (main) thread while inside, and with ``deadline`` end the
    process that many seconds after the first of them at the latest; elsewhere only the main thread
    receives signals, so this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _State.requested = None  # a new run in this process starts with no stop asked for
    _State.deadline = deadline
    previous = {signum: signal.signal(signum, _handler) for signum in SIGNALS}
    try:
        yield
    finally:
        _State.deadline = None
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def reclaim() -> None:
    """Put tfxd's handlers back after TensorFlow took SIGTERM over. A multi-worker strategy (or a
    tf.distribute.Server) starts TensorFlow's coordination service, whose preemption notifier installs a
    C-level SIGTERM handler of its own (tsl's SigtermNotifier, for tf.distribute's PreemptionCheckpointHandler,
    which tfxd does not use): from then on the signal neither reaches Python nor ends the process, and a
    replica waits for Kubernetes' SIGKILL. Only where handling() is on (Python still records our handler)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _handler:
        for signum in SIGNALS:
            signal.signal(signum, _handler)


@contextlib.contextmanager
def deferring() -> Iterator[None]:
    """While inside (the Trainer's fit), a stop waits for ``check()`` at the next step boundary. Installs
    the handlers itself where nothing has (a Trainer in a container of its own, on Kubeflow or Vertex),
    with the deadline of a cluster's process: a step that does not end in time does not hold the stop."""
    with (handling(DEADLINE_SECONDS) if signal.getsignal(signal.SIGTERM) is not _handler
          else contextlib.nullcontext()):
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
