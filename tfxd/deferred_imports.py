"""Beam's Google Cloud connectors imported when a program first reads one from ``apache_beam.io``, not
whenever Beam is imported.

apache_beam/io/__init__.py (Beam 2.74) star-imports apache_beam.io.gcp.bigquery, apache_beam.io.gcp.pubsub,
gcsio and apache_beam.transforms.xlang.io in one ``try`` block that skips them all on an ImportError, as in
an environment without Google's client libraries. The BigQuery connector imports google.cloud.bigquery,
its storage client and, through them, IPython's widgets: 0.7 s of Beam's 1.1 s import on a 2-core machine,
paid by every process tfxd starts that imports Beam (a run, each Kubeflow task, each SDK worker) for
connectors no tfxd pipeline uses, and with three of Google's Python-version warnings printed.

Where tfxd is imported before Beam, an import hook refuses the BigQuery connector to that ``try`` block
alone (the import made from apache_beam.io's own ``__init__``), so Beam skips the block as it would without
the libraries, and apache_beam.io gets a module ``__getattr__`` (PEP 562; patch beam.cloud_io_deferred) that
runs the block's imports the first time a name it would have bound is read: ``beam.io.ReadFromBigQuery``,
``beam.io.WriteToPubSub`` and the rest work as before, a second later. Any other import of those modules,
direct or from another module, is never refused. What changes: ``from apache_beam.io import *`` no longer
brings the connectors' names (a star import reads the module's own names); import them from their modules.
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import threading
import types
from typing import Any

from tfxd import patches

IO = "apache_beam.io"
REFUSED = "apache_beam.io.gcp.bigquery"  # the try block's first import: refusing it skips the block
# the try block's imports, in its order: (module, None) star-imports the module, (module, name) binds one name
BLOCK: tuple[tuple[str, str | None], ...] = (
    ("apache_beam.io.gcp.bigquery", None), ("apache_beam.io.gcp.pubsub", None),
    ("apache_beam.io.gcp", "gcsio"), ("apache_beam.transforms.xlang.io", None))
FRAMES_LOOKED_AT = 40  # the import system's frames between the importing statement and a finder
_lock, _ran = threading.Lock(), threading.Event()  # the try block's imports run once, by one thread


class _RefuseToBeamsIoInit(importlib.abc.MetaPathFinder):
    """Refuses REFUSED to apache_beam.io's ``__init__`` (once), giving apache_beam.io the ``__getattr__``."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name != REFUSED or not _imported_by_beams_io_init():
            return None
        sys.meta_path.remove(self)
        patches.assigned("beam.cloud_io_deferred", _cloud_names)
        raise ImportError(f"{REFUSED} deferred by tfxd until apache_beam.io is asked for it (tfxd.deferred_imports)")


def _imported_by_beams_io_init() -> bool:
    frame: types.FrameType | None = sys._getframe(1)
    for _ in range(FRAMES_LOOKED_AT):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == IO and frame.f_code.co_name == "<module>":
            return True
        frame = frame.f_back
    return False


def _cloud_names(name: str) -> Any:
    """apache_beam.io's ``__getattr__``: the try block's imports run (once, as the block would have run
    them: an ImportError skips the rest), then ``name`` as they bound it."""
    io = sys.modules[IO]
    with _lock:
        if not _ran.is_set():
            _run_block(vars(io))
            _ran.set()
    if name in vars(io):
        return vars(io)[name]
    raise AttributeError(f"module {IO!r} has no attribute {name!r}")


def _run_block(namespace: dict[str, Any]) -> None:
    try:
        for module_name, bound in BLOCK:
            module = importlib.import_module(module_name)
            if bound is not None:
                namespace[bound] = getattr(module, bound)
                continue
            public = getattr(module, "__all__", None) or [key for key in vars(module) if not key.startswith("_")]
            namespace.update({key: getattr(module, key) for key in public})
    except ImportError:
        pass  # as Beam's own block: an environment without Google's client libraries has none of them


def install() -> None:
    """The hook, where Beam's io package is not imported yet (tfxd/__init__.py calls it)."""
    if IO not in sys.modules and not any(isinstance(finder, _RefuseToBeamsIoInit) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RefuseToBeamsIoInit())
