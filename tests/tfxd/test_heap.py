"""tfxd.heap: what a process imported is kept out of the collector's full collections (gc.freeze), once a
process, and the young objects are collected less often after; no collection runs while a verb imports. Each case runs in a process of its own, since a freeze
lasts as long as its process."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import BASE_SPEC, write_spec
from tfxd import heap


def _run(code: str) -> dict:
    result = subprocess.run([sys.executable, "-c", f"import gc, json, sys\nfrom tfxd import heap\n{code}"],
                            capture_output=True, text=True, timeout=120, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_settle_freezes_what_the_process_holds_once():
    seen = _run("""
before = gc.get_freeze_count()
heap.settle()
first = gc.get_freeze_count()
later = [[object()] for _ in range(10_000)]  # objects made after the freeze
heap.settle()
print(json.dumps({"before": before, "first": first, "again": gc.get_freeze_count()}))
""")
    assert seen["before"] == 0
    assert seen["first"] > 1_000
    assert seen["again"] == seen["first"]  # the second call froze nothing: a run's later garbage stays collectable


def test_settled_the_young_are_collected_less_often_and_their_cycles_still_freed():
    seen = _run("""
import weakref
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
heap.settle()
class Node:
    pass
cycle = Node()
cycle.itself, freed = cycle, []
weakref.finalize(cycle, freed.append, True)
del cycle
kept = [[index] for index in range(120_000)]  # 120,000 containers more made than freed
print(json.dumps({"threshold": gc.get_threshold()[0], "collections": collections, "freed": freed}))
""")
    assert seen["threshold"] == heap.YOUNG_OBJECTS
    assert 1 <= len(seen["collections"]) <= 3, seen["collections"]  # Python's threshold: ~170 of them
    assert set(seen["collections"]) == {0}  # young ones only, no walk of the older generations
    assert seen["freed"] == [True]  # the cycle made before them was collected


def test_no_collection_runs_while_importing_and_the_imports_are_settled_after():
    seen = _run("""
collections = []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
with heap.imports_uncollected():
    enabled_inside = gc.isenabled()
    import numpy  # noqa: F401
    kept = [[index] for index in range(100_000)]  # as a module's tables: enough for several collections
    during = list(collections)
print(json.dumps({"inside": enabled_inside, "during": during, "after": gc.isenabled(),
                  "frozen": gc.get_freeze_count()}))
""")
    assert seen["inside"] is False and seen["during"] == []
    assert seen["after"] is True
    assert seen["frozen"] > 100_000


def test_a_collector_turned_off_stays_off_and_a_failed_import_still_settles():
    seen = _run("""
gc.disable()
try:
    with heap.imports_uncollected():
        import a_module_that_is_not_there  # noqa: F401
except ImportError:
    pass
print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}))
""")
    assert seen["enabled"] is False
    assert seen["frozen"] > 1_000


def test_a_beam_executor_settles_before_its_do_runs(monkeypatch):
    """A Kubeflow or Vertex task runs the executor through TFX's entrypoint, which settles nothing: the
    executor's Do does (in a local run the command line has settled already and the call does nothing)."""
    from tfxd.direct_runner import BeamMendedExecutor

    calls = []
    monkeypatch.setattr(heap, "settle", lambda: calls.append("settled"))

    class _Executor:
        _beam_pipeline_args: list = []

        def Do(self, *args):  # noqa: N802 - TFX's name
            return list(calls)

    class _Mended(BeamMendedExecutor, _Executor):
        pass

    assert _Mended().Do({}, {}, {}) == ["settled"]


def test_tfxd_run_has_settled_its_imports_when_it_builds_the_pipeline(project):
    """The pipeline's builder (tfxd.pipeline.assembly.dag) stands in for itself; the run imports the rest
    of its libraries (TFX's runners, TensorFlow, Beam) as it does, once its worker pool or engine is
    starting (pipeline/run/local_run.py, _libraries_imported): by the time it builds the pipeline the
    imported objects are frozen and the collector is back on."""
    spec = write_spec(project, BASE_SPEC)
    seen = _run(f"""
import types
stand_in = types.ModuleType("tfxd.pipeline.assembly.dag")
def tfx_pipeline(loaded, to=None, metadata=None):
    print(json.dumps({{"frozen": gc.get_freeze_count(), "enabled": gc.isenabled(), "name": loaded.spec.name,
                      "tfx": "tfx.orchestration.local.local_dag_runner" in sys.modules}}))
    sys.exit(0)
stand_in.tfx_pipeline = tfx_pipeline
import tfxd.pipeline.assembly
sys.modules[stand_in.__name__] = tfxd.pipeline.assembly.dag = stand_in
from tfxd.cli.main import main
sys.argv = ["tfxd", "run", {str(spec)!r}]
main()
""")
    assert seen["name"] == "demo" and seen["enabled"] is True and seen["tfx"] is True
    assert seen["frozen"] > 500_000  # what the process held then: TensorFlow's, TFX's and Beam's objects
