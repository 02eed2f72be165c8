"""The garbage collector kept off what a process imported: TensorFlow, TFX and Beam's objects.

Importing them builds a heap of a few million objects that CPython's collector tracks, and each full
(oldest-generation) collection walks all of them: a taxi run spent ~1.3 s of its start-up in nine such
collections while importing, and ~0.3-0.5 s a collection later, one of them in the middle of the
Trainer's export (bench/RESULTS.md). Those objects live as long as the process (modules, classes,
functions), so walking them finds nothing to free.

``imports_uncollected`` holds the collector off while a verb imports them, then ``settle`` moves every
object there is into the permanent generation (``gc.freeze``), which collections skip; later objects are
collected as before, though less often: the youngest generation is collected once YOUNG_OBJECTS more
objects were made than freed, where Python's 700 had a taxi run collect ~790 times, promote enough to
collect the middle generation ~70 times and the oldest 6 times (0.05-0.07 s each, a run's own graphs and
pipelines by then), 0.55-0.7 s of the run; at 50,000, 9 young collections and no other, 0.17 s. What is
garbage in cycles waits that much longer: the taxi run's peak RSS 822-824 -> 878-880 MB (at 10,000 and
20,000: 834-838 MB, 0.31-0.35 s of collections, the middle generation's walks most of it). ``settle`` runs
once a process: frozen later, a run's own garbage in cycles (one component's graphs) would outlive it.
An executor settles at the start of its Do, so that a component run by TFX's entrypoint (a Kubeflow or
Vertex task) gets it too; in ``tfxd run`` the run settled first, once its libraries were imported
(pipeline/run/local_run.py), and the executors' call does nothing.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_OBJECTS = 50_000  # the youngest generation's threshold once settled (Python's: 700)
_settled = False


def settle() -> None:
    """Freeze what the process holds now, once: full collections skip it from here on, and the young
    objects are collected every YOUNG_OBJECTS."""
    global _settled
    if not _settled:
        _settled = True
        gc.freeze()
        gc.set_threshold(YOUNG_OBJECTS, *gc.get_threshold()[1:])


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
