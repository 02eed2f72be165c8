"""How tfxd.deferred_imports and tfxd.deferred_work put a library module's body off: a finder that hands
the import system the module with its own loader wrapped, when a given module's body imports it; a loader
whose body runs at the first read of one of the module's names, once, whichever thread reads first; and
the one way both put their finders on sys.meta_path (``install``).

A module made this way is in sys.modules, with its submodules importable, from the start; only the names its
body binds wait. What runs the body later is that module's own ``__getattr__`` and ``__dir__`` (PEP 562),
assigned as patches of tfxd/patches.py by each deferral.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Iterable
from typing import Any

FRAMES_LOOKED_AT = 40  # the import system's frames between the importing statement and a finder


def imported_by(module: str) -> bool:
    """Whether the import under way is a statement of ``module``'s own body (its file run as it is imported)."""
    frame: types.FrameType | None = sys._getframe(1)
    for _ in range(FRAMES_LOOKED_AT):
        if frame is None:
            return False
        if frame.f_globals.get("__name__") == module and frame.f_code.co_name == "<module>":
            return True
        frame = frame.f_back
    return False


class Wrapping(importlib.abc.Loader):
    """A library's own loader of a module, wrapped: the module is made as that loader makes it."""

    def __init__(self, loader: importlib.machinery.SourceFileLoader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)


class BodyOnFirstRead(Wrapping):
    """A module's own loader whose body runs later, once: the first thread to ask runs it, the others wait
    for it; a body that raised runs again at the next ask (and raises again). What the body itself reads
    from its module while it runs (a package's ``from . import sub``) is answered as a running body's
    module answers: what it has bound so far."""

    def __init__(self, loader: importlib.machinery.SourceFileLoader) -> None:
        super().__init__(loader)
        self._lock, self._ran, self._running = threading.RLock(), False, False

    def run(self, module: types.ModuleType) -> None:
        with self._lock:
            if self._ran or self._running:
                return
            self._running = True
            try:
                self._loader.exec_module(module)  # the body as its library wrote it
                self._ran = True
            finally:
                self._running = False

    def read(self, module: types.ModuleType, name: str) -> Any:
        """The module's ``__getattr__``: its body run, then ``name`` as the body bound it."""
        if not (name.startswith("__") and name.endswith("__")):  # the bodies bind no other dunder name
            self.run(module)
            if name in vars(module):
                return vars(module)[name]
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    def names(self, module: types.ModuleType) -> list[str]:
        """The module's ``__dir__``: its body run, then its names."""
        self.run(module)
        return sorted(vars(module))

    def hooks(self, module: types.ModuleType) -> dict[str, Any]:
        """The module's ``__getattr__`` and ``__dir__``, which run its body (read, names)."""
        return {"__getattr__": lambda name: self.read(module, name), "__dir__": lambda: self.names(module)}


class FindWithBodyPutOff(importlib.abc.MetaPathFinder):
    """Finds the module MODULE as Python's path finder does (once), when IMPORTER's own body imports it (None:
    any importer), with its loader wrapped in LOADER, which puts the module's body off."""

    MODULE: str
    IMPORTER: str | None = None
    LOADER: type[Wrapping]

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != self.MODULE or (self.IMPORTER is not None and not imported_by(self.IMPORTER)):
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            spec.loader = self.LOADER(spec.loader)
        return spec


def install(hooks: Iterable[tuple[str, type[importlib.abc.MetaPathFinder]]]) -> None:
    """Each (module, finder class) hook first on sys.meta_path, where its module is not imported yet and no
    finder of that class is there already (a second install, or a second import of tfxd's package)."""
    for module, hook in hooks:
        if module not in sys.modules and not any(isinstance(finder, hook) for finder in sys.meta_path):
            sys.meta_path.insert(0, hook())
