"""A process's exit without Python's last garbage collections over everything it imported.

As it exits, CPython collects garbage again while it clears each module, each time walking every object
the collector tracks: about 0.6 s in a process that imported Beam (py-spy: gc_collect_main under
Py_FinalizeEx), which a Beam worker process spends after its last bundle. Beam's DirectRunner waits for
its workers one after the other when a pipeline ends (worker_handlers.WorkerHandlerManager.close_all ->
SubprocessSdkWorkerHandler.stop_worker joins the thread that waits for the process), so a component on
2 worker processes waited about 1.1 s for them to exit, four components a run.

Importing this module registers ``gc.freeze`` to run at exit: every object moves to the permanent
generation, which those collections skip. Objects are still freed by their reference counts as the
modules are cleared, and the other atexit handlers (logging's flush, weakref.finalize's) still run; only
garbage in reference cycles is left to the operating system. Beam imports it in each worker process it
starts, as a plugin (``--beam_plugin``, tfxd.direct_runner.direct_args), and the command line imports it
for its own process, which took about 2 s to exit after a run (TensorFlow, TFX and Beam imported); the
import is what it does.
"""

from __future__ import annotations

import atexit
import gc

atexit.register(gc.freeze)
