"""Work two libraries do as they are imported, for a case no tfxd process meets, put off until it is met
or skipped where its answer is known; beside tfxd.deferred_imports, which puts off whole imports.

Google's api_core (2.29) checks at its import, and every Google client package (google.cloud.storage,
aiplatform, ...) at its own, whether the running Python is still supported, and builds the warning's label
first: the package's distribution name, looked up in ``importlib.metadata.packages_distributions()``, which
reads every installed distribution's files (0.06-0.07 s on 2 cores, each time). The packages ask it for
their dotted import names (``google.api_core``), and that mapping's keys are top-level names only
(``google``): its answer is always None for them. Where tfxd is imported first, the lookup answers None for
a dotted name without reading the distributions (patch google.package_names_known), and asks as before for
any other. Beam imports api_core (apache_beam.utils.retry) in every process that imports Beam: a run, each
SDK worker, each Kubeflow task; importing aiplatform asked it 12 times (0.8 s).

TFDV's statistics package imports its time-format generator, which compiles a regular expression for each
of its date and time formats at its import (0.02-0.03 s), for semantic-domain statistics that TFDV makes
only when StatsOptions.enable_semantic_domain_stats is set, which no tfxd spec does. Where tfxd is imported
first, the module TFDV's stats_impl imports has its body put off until a name is read from it (patch
tfdv.time_formats_deferred): ``time_stats_generator.TimeStatsGenerator()``, where those statistics are
asked for, runs it as TFDV wrote it.

Each is judged against the library imported without tfxd (tests/tfxd/test_deferred_work.py).
"""

from __future__ import annotations

import types
from typing import Any

from tfxd import deferred_loading, patches
from tfxd.deferred_loading import BodyOnFirstRead, FindWithBodyPutOff, Wrapping

VERSION_SUPPORT = "google.api_core._python_version_support"


class _PackageNamesKnown(Wrapping):
    """api_core's loader of its version-support module, whose package-name lookup answers None for a dotted
    import name at once, as ``packages_distributions()`` would, once the module's body has run."""

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        looked_up = module._get_pypi_package_name

        def package_name(module_name: str) -> Any:
            return None if "." in module_name else looked_up(module_name)

        patches.assigned("google.package_names_known", package_name)


class _SkipDottedPackageNames(FindWithBodyPutOff):
    """google.api_core's version-support module, imported by any module, with the lookup above."""

    MODULE, LOADER = VERSION_SUPPORT, _PackageNamesKnown


TIME_FORMATS, TFDV_STATS = ("tensorflow_data_validation.statistics.generators.time_stats_generator",
                            "tensorflow_data_validation.statistics.stats_impl")


class _TimeFormatsOnFirstRead(BodyOnFirstRead):
    """TFDV's loader of its time-format generator, its body run at the first read of a name from it."""

    def exec_module(self, module: types.ModuleType) -> None:
        patches.assigned_each("tfdv.time_formats_deferred", self.hooks(module))


class _DeferTfdvTimeFormats(FindWithBodyPutOff):
    """TFDV's time-format generator, when TFDV's stats_impl imports it, with its body put off."""

    MODULE, IMPORTER, LOADER = TIME_FORMATS, TFDV_STATS, _TimeFormatsOnFirstRead


_HOOKS: tuple[tuple[str, type[FindWithBodyPutOff]], ...] = (
    (VERSION_SUPPORT, _SkipDottedPackageNames), (TIME_FORMATS, _DeferTfdvTimeFormats))


def install() -> None:
    """The hooks, for what is not imported yet (tfxd/__init__.py calls it)."""
    deferred_loading.install(_HOOKS)
