"""A process's exit without Python's last garbage collections over everything it imported.

As it exits, CPython collects garbage again while it clears each module, each time walking every object
the collector tracks (gc_collect_main under Py_FinalizeEx): a walk as long as what the process imported,
Beam and TensorFlow included, which a Beam worker process makes after its last bundle. Beam's
DirectRunner waits for its workers one after the other when a pipeline ends
(worker_handlers.WorkerHandlerManager.close_all -> SubprocessSdkWorkerHandler.stop_worker joins the
thread that waits for the process), so every component that runs Beam waits for each worker's walks in
turn.

Importing this module registers ``gc.freeze`` to run at exit: every object moves to the permanent
generation, which those collections skip. Objects are still freed by their reference counts as the
modules are cleared, and the other atexit handlers (logging's flush, weakref.finalize's) still run; only
garbage in reference cycles is left to the operating system. Beam imports it in each worker process it
starts, as a plugin (``--beam_plugin``, tfxd.direct_runner.direct_args), and the command line imports it
for its own process, which has the most to walk after a run (TensorFlow, TFX and Beam imported); the
import is what it does. bench/RESULTS.md has what the walks took. The command line's process then ends
through ``ended``, which leaves the modules' clearing to the operating system as well.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading
from typing import NoReturn

atexit.register(gc.freeze)


def ended(code: object) -> NoReturn:
    """The command line's process ends with ``sys.exit``'s ``code`` as Python would end it, its threads
    joined, its atexit handlers run (logging's shutdown, weakref.finalize's: temporary folders, the
    freeze above) and its standard streams flushed, but without clearing its modules one by one: a run's
    process (TensorFlow, TFX and Beam imported) took 0.08-0.1 s to free them, which the operating system
    does at once. Its files are its own to close: tfxd's are written and closed before a command ends."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # what Python runs at exit (Py_FinalizeEx), callable from the module itself
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            stream.flush()
    os._exit(code or 0)
