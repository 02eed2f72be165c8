"""Tests of the benchmark harness (bench/), which is scripts, not a package."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from tests.conftest import REPO

BENCH = os.path.join(REPO, "bench")


def bench_module(name: str) -> ModuleType:
    """A bench module as bench/run.py loads it: bench/ on the path (its modules import `common` as scripts
    do; run.py puts it there for good too), then the module by its own name."""
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    return importlib.import_module(name)
