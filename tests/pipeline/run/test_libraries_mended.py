"""Building a pipeline changes no library: tfxd's patches of TFX and Beam (tfxd/patches.py) apply where a
run starts, for the run, and are put back after it."""

from __future__ import annotations

import sys
from typing import Any

from tests.conftest import BASE_SPEC, write_spec
from tfxd import patches
from tfxd.patches import PATCHES, owner_of
from tfxd.pipeline.assembly.dag import tfx_pipeline
from tfxd.pipeline.run import local_run
from tfxd.pipeline.spec.load import load_spec

STATE_CACHE = "apache_beam.runners.portability.fn_api_runner.worker_handlers:STATE_CACHE_SIZE_MB"


ABSENT = object()


def _targets() -> dict[str, Any]:
    """What every patch's targets are now. A module hook a deferral adds where the library is imported after
    tfxd (tfxd/deferred_imports.py: ``google.cloud.pubsub:__getattr__``, made when Beam's Pub/Sub connector
    imports the package) is absent where the package was imported otherwise, as resolving the target here
    does in a process that had not imported it yet: ABSENT, a value like any other, since no run changes it."""
    return {target: getattr(*owner_of(target), ABSENT) for patch in PATCHES for target in patch.targets}


def _changed(before: dict[str, Any]) -> list[str]:
    now = _targets()
    return [target for target, value in before.items() if now[target] != value]


def _pipeline(project, workers: int) -> Any:
    return tfx_pipeline(load_spec(str(write_spec(project, BASE_SPEC + f"beam: {{workers: {workers}}}\n"))))


def test_building_a_pipeline_changes_no_library(project):
    before = _targets()
    tfx = _pipeline(project, 1)
    assert "--direct_running_mode=in_memory" in tfx.beam_pipeline_args  # the run would turn the cache off
    assert _changed(before) == []
    with patches.applied("beam.state_cache_off", 0):  # a change is seen
        assert _changed(before) == [STATE_CACHE]


def test_a_run_mends_tfx_and_beam_while_it_runs_and_puts_them_back(project, monkeypatch):
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    tfx = _pipeline(project, 1)
    monkeypatch.setattr(sys, "argv", ["tfxd", "-v", "run", "spec.yaml"])
    before = _targets()
    with local_run.libraries_mended(tfx, "beam"):
        assert worker_handlers.STATE_CACHE_SIZE_MB == 0 and sys.argv == ["tfxd"]
        assert sorted(_changed(before)) == sorted(
            target for patch in PATCHES if patch.id in (
                "beam.signatures_remembered", "beam.dofn_specs_remembered", "beam.compressions_remembered",
                "beam.option_views_remembered", "beam.state_cache_off", "beam.sampler_wakes_often", "beam.direct_workers_forked", "beam.worker_loss_fails_bundles",
                "tfx.command_line",
                "tfx.orchestrator_pinned")
            for target in patch.targets)
    assert _changed(before) == [] and worker_handlers.STATE_CACHE_SIZE_MB == before[STATE_CACHE] > 0


def test_worker_processes_keep_their_state_cache(project):
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    tfx = _pipeline(project, 2)
    assert "--direct_running_mode=multi_processing" in tfx.beam_pipeline_args
    with local_run.libraries_mended(tfx, "local"):
        assert worker_handlers.STATE_CACHE_SIZE_MB > 0
