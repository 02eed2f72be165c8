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



def test_writing_results_keeps_the_hand_written_section_last(tmp_path, monkeypatch):
    """A full run writes RESULTS.md's figures anew and a run of one spliced benchmark replaces its own part;
    both keep the hand-written figures behind the code's comments, as they were, at the end."""
    why = f"{bench_run.WHY_HEADING}\n\n#### tfxd/x.py\n\n- a figure (2026-11-28, abc1234).\n"
    (tmp_path / "RESULTS.md").write_text("# Results\n\n| a | 1 |\n\n### Reliability\n\nold\n\n" + why)
    monkeypatch.setattr(bench_run, "HERE", str(tmp_path))
    [(name, (prefix, heading))] = list(bench_run.SPLICED.items())[:1]
    bench_run._splice([f"{prefix} new |"], [f"{heading}\n\nnew figures"], [name])
    text = (tmp_path / "RESULTS.md").read_text()
    assert text.endswith("\n\n" + why) and text.count(bench_run.WHY_HEADING) == 1
    assert f"{heading}\n\nnew figures" in text and f"{prefix} new |" in text
    bench_run._write_results(["# Results", "", "| b | 2 |"], bench_run._results_parts()[1])
    assert (tmp_path / "RESULTS.md").read_text() == "# Results\n\n| b | 2 |\n\n" + why
