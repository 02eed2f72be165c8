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
import is what it does. bench/RESULTS.md has what the walks took.
"""

from __future__ import annotations

import atexit
import gc

atexit.register(gc.freeze)
