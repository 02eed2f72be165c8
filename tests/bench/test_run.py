"""`bench/run.py --check`: a missed target fails the run and is named; met targets pass."""

from __future__ import annotations

import json

import pytest

from tests.bench import bench_module

bench_run = bench_module("run")


def _write(folder, name: str, targets: list[dict] | None) -> None:
    result = {"name": name} if targets is None else {"name": name, "targets": targets}
    (folder / f"{name}.json").write_text(json.dumps(result))


def test_all_met_passes(tmp_path, capsys):
    _write(tmp_path, "cli_latency", [{"figure": "CLI latency", "wanted": "validate median < 0.5 s", "met": True}])
    assert bench_run._report(bench_run._stored(["cli_latency"], str(tmp_path))) == 0
    assert "targets met: 1; missed: 0" in capsys.readouterr().err


def test_a_missed_target_fails_naming_it(tmp_path, capsys):
    _write(tmp_path, "e2e_taxi", [
        {"figure": "End to end, taxi vs TFX as shipped", "wanted": "wall ratio <= 0.25", "met": False},
        {"figure": "End to end, taxi vs the control", "wanted": "wall ratio <= 0.45", "met": True}])
    assert bench_run._report(bench_run._stored(["e2e_taxi"], str(tmp_path))) == 1
    err = capsys.readouterr().err
    assert "MISSED e2e_taxi: End to end, taxi vs TFX as shipped: wall ratio <= 0.25: NOT met" in err
    assert "control" not in err
    assert "targets met: 1; missed: 1" in err


@pytest.mark.parametrize("targets", [None, "absent"])
def test_a_result_without_targets_is_a_miss(tmp_path, capsys, targets):
    if targets is None:
        _write(tmp_path, "strategies", None)  # an old result, from before targets were recorded
    assert bench_run._report(bench_run._stored(["strategies"], str(tmp_path))) == 1
    assert "MISSED strategies: no result with targets" in capsys.readouterr().err

