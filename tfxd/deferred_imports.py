"""Beam's Google Cloud connectors imported when a program first reads one from ``apache_beam.io``, not
whenever Beam is imported; and the same for what else the libraries import for a notebook or a cloud a
tfxd process on local folders never meets (listed last).

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

TFX's tfx/components/__init__.py (TFX 1.16) imports every standard component to bind its class: the Tuner's
keras_tuner (and through it Keras 3), the InfraValidator's Kubernetes client, the BulkInferrer's Beam
RunInference, none of which a tfxd pipeline runs, while any import of a module under tfx.components (an
executor, a constants module) runs that ``__init__`` first. Where tfxd is imported before TFX's components,
the package is made with TFX's own ``__init__`` put off (patch tfx.components_deferred): its ``__all__`` is
read from that file, and the first read of any other name from the package (``tfx.components.Trainer``, a
star import, ``dir``) runs the file as TFX wrote it, in the package, then answers. Submodules import as
before; only the package's own names wait, and an error the file would raise (a missing library) is raised
at that first read instead of at the import. tfxd names classes by their own modules.

TFMA's tensorflow_model_analysis/metrics/__init__.py (TFMA 0.47) imports its Rouge metric's module, which
imports NLTK (and through it scikit-learn) and rouge_score: 0.3 s of every process that imports TFMA, and
TFX's component specs import TFMA, for a text metric no tfxd spec asks for. Where tfxd is imported first,
that import binds the module with its body put off (patch tfma.rouge_deferred): the first read of a name
from it, or TFMA's registry asked for a class the body registers (``is_registered_metric``, or ``in``,
``[]`` or ``get`` on ``registered_metrics()``, as TFMA's metric_specs asks before it makes a metric from an
EvalConfig), runs the body as TFMA wrote it. What changes: ``registered_metrics()`` listed whole before
then holds no Rouge.

TFMA's tensorflow_model_analysis/utils/math_util.py (TFMA 0.47) does ``from scipy import stats`` for the
Student's t of its confidence intervals, and TFMA's utils package imports it: SciPy's stats package (its
distributions built at import) is 0.14 s of every process that imports TFMA, and no tfxd spec asks for
confidence intervals. Where tfxd is imported first, an import of the package (TFMA's, or any other) binds
it with its ``__init__`` put off (patch scipy.stats_deferred): the first read of a name from it
(``stats.t``; ``from scipy.stats import norm`` reads at once) or ``dir`` runs the ``__init__`` as SciPy
wrote it, then answers. Its submodules import as before.

The same, for four more, each judged against the library imported without tfxd (tests/tfxd/
test_deferred_imports.py). IPython's package ``__init__`` (its terminal shell, prompt_toolkit, jedi), when
TFDV's display_util imports IPython.display for notebook displays: put off until a name is read from the
package (patch ipython.init_deferred), except ``get_ipython``, which Beam asks for at every pipeline's run:
it answers None, as IPython's own does, without importing IPython's shell while no shell can exist (its
module not imported), and as IPython's own after; IPython.display imports without the ``__init__``.
TFMA's view package, which TFMA's ``__init__`` imports and whose widget views import Jupyter's widgets (and
IPython's shell): its ``__init__`` put off until a name other than a submodule is read (patch
tfma.views_deferred; ``tfma.view.render_*`` in a notebook). Beam's GCS filesystem, which
apache_beam.io.filesystems imports with Google's storage and auth clients: refused to that file's own
import, as Beam skips it without Google's libraries, and imported by ``FileSystems.get_filesystem`` at a
gs:// path (patch beam.gcs_filesystem_deferred). Google's Pub/Sub client package, which Beam's Pub/Sub
connector imports, and Beam's DirectRunner imports that connector at every pipeline's run: its ``__init__``
(the publisher and subscriber clients) put off until a name is read from it (patch pubsub.init_deferred).
Together about 0.7 s of every process that imports TFDV, TFMA and Beam and runs a pipeline, on 2 cores (a
run, each Kubeflow task, the SDK worker pool).

The mechanism (a finder that wraps the library's own loader) is tfxd/deferred_loading.py.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any

from tfxd import deferred_loading, patches
from tfxd.deferred_loading import BodyOnFirstRead, FindWithBodyPutOff, Wrapping, imported_by

IO = "apache_beam.io"
REFUSED = "apache_beam.io.gcp.bigquery"  # the try block's first import: refusing it skips the block
# the try block's imports, in its order: (module, None) star-imports the module, (module, name) binds one name
BLOCK: tuple[tuple[str, str | None], ...] = (
    ("apache_beam.io.gcp.bigquery", None), ("apache_beam.io.gcp.pubsub", None),
    ("apache_beam.io.gcp", "gcsio"), ("apache_beam.transforms.xlang.io", None))
_lock, _ran = threading.Lock(), threading.Event()  # the try block's imports run once, by one thread


class _RefuseToBeamsIoInit(importlib.abc.MetaPathFinder):
    """Refuses REFUSED to apache_beam.io's ``__init__`` (once), giving apache_beam.io the ``__getattr__``."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name != REFUSED or not imported_by(IO):
            return None
        sys.meta_path.remove(self)
        patches.assigned("beam.cloud_io_deferred", _cloud_names)
        raise ImportError(f"{REFUSED} deferred by tfxd until apache_beam.io is asked for it (tfxd.deferred_imports)")


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
            if bound is not None:  # `from module import bound`: a name of the module, or its submodule
                namespace[bound] = (getattr(module, bound) if hasattr(module, bound)
                                    else importlib.import_module(f"{module_name}.{bound}"))
                continue
            public = getattr(module, "__all__", None) or [key for key in vars(module) if not key.startswith("_")]
            namespace.update({key: getattr(module, key) for key in public})
    except ImportError:
        pass  # as Beam's own block: an environment without Google's client libraries has none of them


class _InitOnFirstRead(BodyOnFirstRead):
    """TFX's loader of the package, its ``__init__`` run at the first read of a name it binds; run at once
    if the file does more than import names and list them (another TFX than the one read for this)."""

    def exec_module(self, module: types.ModuleType) -> None:
        source = self._loader.get_source(module.__name__)
        tree = ast.parse(source) if source is not None else None
        listed = _only_imports_listed(tree) if tree is not None else None
        if tree is None or listed is None:
            self._loader.exec_module(module)
            return
        patches.assigned("tfx.components_deferred", ast.get_docstring(tree), "__doc__")
        patches.assigned("tfx.components_deferred", listed, "__all__")
        patches.assigned_each("tfx.components_deferred", self.hooks(module))


COMPONENTS = "tfx.components"


class _DeferTfxComponentsInit(FindWithBodyPutOff):
    """tfx.components, with its ``__init__`` put off."""

    MODULE, LOADER = COMPONENTS, _InitOnFirstRead


def _only_imports_listed(tree: ast.Module) -> list[str] | None:
    """The file's ``__all__`` when all it does is a docstring, absolute imports of names and ``__all__``;
    else None."""
    listed = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]
                and isinstance(node.value, ast.List)):
            items = [item.value for item in node.value.elts
                     if isinstance(item, ast.Constant) and isinstance(item.value, str)]
            if len(items) == len(node.value.elts):
                listed = [str(item) for item in items]
                continue
        return None
    return listed


ROUGE, TFMA_METRICS = "tensorflow_model_analysis.metrics.rouge", "tensorflow_model_analysis.metrics"
REGISTRY = "tensorflow_model_analysis.metrics.metric_types"


class _RunOnFirstUse(BodyOnFirstRead):
    """TFMA's loader of the Rouge module, its body run at the first read of a name from the module, or when
    TFMA's metric registry is asked for a class the body registers (read from its source); run at once if
    the source registers none (another TFMA than the one read for this)."""

    def exec_module(self, module: types.ModuleType) -> None:
        source = self._loader.get_source(module.__name__)
        pending = _registered_by(ast.parse(source)) if source is not None else frozenset()
        if not pending:
            self._loader.exec_module(module)
            return
        registry = importlib.import_module(REGISTRY)
        registered, is_registered = registry.registered_metrics, registry.is_registered_metric

        def run() -> None:
            self.run(module)

        def is_registered_metric(name: str) -> bool:
            if name in pending:
                run()
            return bool(is_registered(name))

        patches.assigned_each("tfma.rouge_deferred", self.hooks(module))
        patches.assigned("tfma.rouge_deferred", lambda: _RegistryRunOnAsk(registered(), pending, run, registered),
                         "registered_metrics")
        patches.assigned("tfma.rouge_deferred", is_registered_metric, "is_registered_metric")


class _DeferTfmaRouge(FindWithBodyPutOff):
    """TFMA's Rouge module, when tensorflow_model_analysis.metrics' own ``__init__`` imports it, with its body
    put off until it is used."""

    MODULE, IMPORTER, LOADER = ROUGE, TFMA_METRICS, _RunOnFirstUse


def _registered_by(tree: ast.Module) -> frozenset[str]:
    """The classes a module's body registers with TFMA (``metric_types.register_metric(Name)`` statements)."""
    return frozenset(
        node.value.args[0].id for node in tree.body
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func).endswith("register_metric")
        and len(node.value.args) == 1 and isinstance(node.value.args[0], ast.Name))


class _RegistryRunOnAsk(dict[str, Any]):
    """TFMA's ``registered_metrics()``, a copy of its registry: asked whether it holds a class the put-off
    module registers (``in``, ``[]``, ``get``), it runs that module first and answers from the registry as it
    is then. Listed whole (iterated, copied into Keras's custom objects), it holds what is registered so far."""

    def __init__(self, found: dict[str, Any], pending: frozenset[str], run: Any, registered: Any) -> None:
        super().__init__(found)
        self._pending, self._run, self._registered = pending, run, registered

    def _ask(self, key: object) -> None:
        if key in self._pending and not super().__contains__(key):
            self._run()
            self.update(self._registered())

    def __contains__(self, key: object) -> bool:
        self._ask(key)
        return super().__contains__(key)

    def __missing__(self, key: str) -> Any:
        self._ask(key)
        if super().__contains__(key):
            return super().__getitem__(key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._ask(key)
        return super().get(key, default)


SCIPY_STATS = "scipy.stats"


class _StatsOnFirstRead(BodyOnFirstRead):
    """SciPy's loader of scipy.stats, its ``__init__`` run at the first read of a name from the package
    (``stats.t``) or of its names (``dir``); its submodules import as before, without it."""

    def exec_module(self, module: types.ModuleType) -> None:
        patches.assigned_each("scipy.stats_deferred", self.hooks(module))


class _DeferScipyStats(FindWithBodyPutOff):
    """scipy.stats, imported by any module (TFMA's math_util: ``from scipy import stats``), with its
    ``__init__`` put off until it is read; a ``from scipy.stats import name`` reads it at once."""

    MODULE, LOADER = SCIPY_STATS, _StatsOnFirstRead


IPYTHON, TFDV_DISPLAY = "IPython", "tensorflow_data_validation.utils.display_util"
IPYTHON_ASKED_BY_BEAM = ("get_ipython", "IPython.core.getipython")  # IPython/__init__.py: from .core.getipython


class _IPythonOnFirstRead(BodyOnFirstRead):
    """IPython's loader of its package, its ``__init__`` run at the first read of a name from the package
    (``IPython.get_ipython``) or of its names; IPython.display and the other submodules import without it."""

    def exec_module(self, module: types.ModuleType) -> None:
        patches.assigned_each("ipython.init_deferred", self.hooks(module))

    def read(self, module: types.ModuleType, name: str) -> Any:
        """``get_ipython``, which Beam asks for at every pipeline's run (interactive_utils.is_in_ipython),
        from the module the ``__init__`` binds it from, without the rest of it; any other name as above."""
        if name == IPYTHON_ASKED_BY_BEAM[0]:
            return _get_ipython
        return super().read(module, name)


IPYTHON_SHELL = "IPython.core.interactiveshell"  # IPython/core/getipython.py imports it at each call


def _get_ipython() -> Any:
    """IPython's get_ipython, whose answer is None until IPython's shell module is imported (no shell can be
    made before it), answered so without importing that module (about 0.05 s), then IPython's own answer."""
    if IPYTHON_SHELL not in sys.modules:
        return None
    return importlib.import_module(IPYTHON_ASKED_BY_BEAM[1]).get_ipython()


class _DeferIPython(FindWithBodyPutOff):
    """IPython's package, when TFDV's display_util imports IPython.display, with its ``__init__`` put off
    until a name is read from the package; IPython.display imports without it."""

    MODULE, IMPORTER, LOADER = IPYTHON, TFDV_DISPLAY, _IPythonOnFirstRead


TFMA_VIEW, TFMA = "tensorflow_model_analysis.view", "tensorflow_model_analysis"


class _ViewsOnFirstRead(BodyOnFirstRead):
    """TFMA's loader of its view package, its ``__init__`` run at the first read of a name from the package
    or of its names, except a submodule's (``from tensorflow_model_analysis.view import util``, as TFMA's own
    modules import it), which imports as it would, without the ``__init__``."""

    def exec_module(self, module: types.ModuleType) -> None:
        patches.assigned_each("tfma.views_deferred", self.hooks(module))

    def read(self, module: types.ModuleType, name: str) -> Any:
        with self._lock:
            submodule = not self._ran and not name.startswith("__") and importlib.util.find_spec(
                f"{module.__name__}.{name}") is not None
        return importlib.import_module(f"{module.__name__}.{name}") if submodule else super().read(module, name)


class _DeferTfmaViews(FindWithBodyPutOff):
    """TFMA's view package, when TFMA's own ``__init__`` imports it, with its ``__init__`` (its widget views:
    Jupyter's widgets, and through them IPython's shell) put off until one of its names is read: a
    ``tfma.view.render_*`` call in a notebook."""

    MODULE, IMPORTER, LOADER = TFMA_VIEW, TFMA, _ViewsOnFirstRead


FILESYSTEMS, GCS_FILESYSTEM = "apache_beam.io.filesystems", "apache_beam.io.gcp.gcsfilesystem"
GCS_SCHEME = "gs"


class _RefuseGcsToFilesystems(importlib.abc.MetaPathFinder):
    """Refuses GCS_FILESYSTEM to apache_beam.io.filesystems' own body, as an environment without Google's
    libraries refuses it (Beam skips a ModuleNotFoundError there)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == GCS_FILESYSTEM and imported_by(FILESYSTEMS):
            raise ModuleNotFoundError(f"{GCS_FILESYSTEM} deferred by tfxd until a gs:// path is met "
                                      "(tfxd.deferred_imports)")


class _FilesystemsWithGcsOnFirstUse(Wrapping):
    """Beam's loader of apache_beam.io.filesystems: its body runs as Beam wrote it with GCS_FILESYSTEM
    refused, then FileSystems.get_filesystem imports that module when it is asked for a gs:// path
    (importing it registers GCSFileSystem, as at Beam's own import). It asks the import system each time,
    not sys.modules: an SDK worker's threads ask at once, and a module another thread is still importing is
    in sys.modules before its class is registered; the import system waits for that thread."""

    def exec_module(self, module: types.ModuleType) -> None:
        refusal = _RefuseGcsToFilesystems()
        sys.meta_path.insert(0, refusal)
        try:
            self._loader.exec_module(module)
        finally:
            sys.meta_path.remove(refusal)
        systems = module.FileSystems
        beams = systems.get_filesystem

        def get_filesystem(path: str) -> Any:
            if systems.get_scheme(path) == GCS_SCHEME:
                importlib.import_module(GCS_FILESYSTEM)
            return beams(path)

        patches.assigned("beam.gcs_filesystem_deferred", staticmethod(get_filesystem))


class _DeferBeamsGcsFilesystem(FindWithBodyPutOff):
    """apache_beam.io.filesystems, imported by any module, its GCS filesystem imported on a first gs:// path."""

    MODULE, LOADER = FILESYSTEMS, _FilesystemsWithGcsOnFirstUse


PUBSUB, BEAM_PUBSUB = "google.cloud.pubsub", "apache_beam.io.gcp.pubsub"


class _PubsubOnFirstRead(BodyOnFirstRead):
    """Google's loader of google.cloud.pubsub, its ``__init__`` (the publisher and subscriber clients of
    google.cloud.pubsub_v1) run at the first read of a name from the package (``pubsub.types``,
    ``pubsub.PublisherClient``, as Beam's connector reads them when it is used) or of its names."""

    def exec_module(self, module: types.ModuleType) -> None:
        patches.assigned_each("pubsub.init_deferred", self.hooks(module))


class _DeferPubsub(FindWithBodyPutOff):
    """google.cloud.pubsub, when Beam's Pub/Sub connector imports it (Beam's DirectRunner imports the
    connector at every pipeline's run, to look for its transforms), with its ``__init__`` put off."""

    MODULE, IMPORTER, LOADER = PUBSUB, BEAM_PUBSUB, _PubsubOnFirstRead


def install() -> None:
    """The hooks, for what is not imported yet (tfxd/__init__.py calls it): Beam's io package and its GCS
    filesystem, TFX's components package, TFMA's Rouge metric and notebook views, SciPy's stats package,
    IPython's package, Google's Pub/Sub client package."""
    hooks = ((IO, _RefuseToBeamsIoInit), (COMPONENTS, _DeferTfxComponentsInit), (ROUGE, _DeferTfmaRouge),
             (SCIPY_STATS, _DeferScipyStats), (IPYTHON, _DeferIPython), (TFMA_VIEW, _DeferTfmaViews),
             (FILESYSTEMS, _DeferBeamsGcsFilesystem), (PUBSUB, _DeferPubsub))
    deferred_loading.install(hooks)
