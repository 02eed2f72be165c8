"""The scaling bench's judge: a size's figure sums each component's least disturbed seconds, so one run's
disturbance in one component does not move it, and a cost per row that grows still fails the target."""

from __future__ import annotations

import importlib.util
import os
import sys

from tests.conftest import REPO

sys.path.insert(0, os.path.join(REPO, "bench"))  # the bench's modules import `common` as scripts do
spec = importlib.util.spec_from_file_location("bench_scaling", os.path.join(REPO, "bench", "scaling.py"))
scaling = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scaling)
sys.path.remove(os.path.join(REPO, "bench"))


def _run(rows: int, example_gen: float, transform: float, trainer: float, wall: float = 0.0,
         rss: float = 1000.0) -> dict:
    components = {"ExampleGen": example_gen, "StatisticsGen": 1.0, "Transform": transform, "Trainer": trainer}
    return {"rows": rows, "components_s": components, "figure_s": example_gen + transform + trainer,
            "wall_s": wall, "peak_rss_mb": rss, "splits": {"train": rows}}


def test_each_components_least_disturbed_seconds_make_a_sizes_figure():
    # two runs of 5M rows, each with one disturbed component (the Trainer's 40 s after its epoch, a slow
    # Transform): neither whole run is undisturbed, the least of each component is
    runs = (_run(5_000_000, 60.0, 154.0, 112.0, wall=400.0, rss=2600.0),
            _run(5_000_000, 61.0, 127.0, 148.0, wall=410.0, rss=2650.0))
    least = scaling._least(runs)
    assert least["components_s"] == {"ExampleGen": 60.0, "StatisticsGen": 1.0, "Transform": 127.0, "Trainer": 112.0}
    assert least["figure_s"] == 299.0 and least["s_per_10k"] == 299.0 / 500
    assert least["wall_s"] == 400.0 and least["peak_rss_mb"] == 2650.0
    assert least["runs_figure_s"] == [326.0, 336.0]
    assert [r["Transform"] for r in least["runs_components_s"]] == [154.0, 127.0]


def test_a_cost_per_row_that_grows_misses_the_target():
    flat = [scaling._least((_run(rows, rows / 1e5, 10 + rows / 4e4, 5 + rows / 5e4),)) for rows in scaling.SIZES]
    assert abs(scaling._ratio(flat) - 1.0) < 1e-9
    # Transform's seconds per row 10% higher from 1M to 5M: the judge bites
    grown = [dict(size) for size in flat]
    extra = 0.1 * (5_000_000 - 1_000_000) / 4e4
    grown[-1] = scaling._least((_run(5_000_000, 50.0, 10 + 5_000_000 / 4e4 + extra, 5 + 5_000_000 / 5e4),))
    assert scaling._ratio(grown) > scaling.COST_TARGET
    assert round(scaling._ratio(grown, "Transform"), 6) == 1.1
