"""The garbage collector kept off what a process imported: TensorFlow, TFX and Beam's objects.

Importing them builds a heap of a few million objects that CPython's collector tracks, and each full
(oldest-generation) collection walks all of them: a taxi run spent ~1.3 s of its start-up in nine such
collections while importing, and ~0.3-0.5 s a collection later, one of them in the middle of the
Trainer's export (bench/RESULTS.md). Those objects live as long as the process (modules, classes,
functions), so walking them finds nothing to free.

``imports_uncollected`` holds the collector off while a verb imports them, then ``settle`` moves every
object there is into the permanent generation (``gc.freeze``), which collections skip; later objects are
collected as before. ``settle`` runs once a process: frozen later, a run's own garbage in cycles (one
component's graphs) would outlive it. An executor settles at the start of its Do, so that a component
run by TFX's entrypoint (a Kubeflow or Vertex task) gets it too; in ``tfxd run`` the run settled first,
once its libraries were imported (pipeline/run/local_run.py), and the executors' call does nothing.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_settled = False


def settle() -> None:
    """Freeze what the process holds now, once: full collections skip it from here on."""
    global _settled
    if not _settled:
        _settled = True
        gc.freeze()


@contextlib.contextmanager
def imports_uncollected() -> Iterator[None]:
    """No collection while the block imports; what it imported settled after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        settle()
        if enabled:
            gc.enable()
