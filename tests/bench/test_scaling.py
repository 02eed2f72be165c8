"""The scaling bench's judge: a size's figure is its median run's, so one run's disturbance does not move
it either way, and a cost per row that grows still fails the target."""

from __future__ import annotations

from tests.bench import bench_module

scaling = bench_module("scaling")


def _run(rows: int, example_gen: float, transform: float, trainer: float, rss: float = 1000.0) -> dict:
    components = {"ExampleGen": example_gen, "StatisticsGen": 1.0, "Transform": transform, "Trainer": trainer}
    figure = example_gen + transform + trainer
    return {"rows": rows, "components_s": components, "figure_s": figure, "s_per_10k": figure / rows * 1e4,
            "wall_s": figure + 10, "peak_rss_mb": rss, "splits": {"train": rows}}


def test_a_sizes_figure_is_its_median_run():
    # three runs of 5M rows: one spared by every disturbance, one with a Trainer 40 s slow, one in between
    runs = (_run(5_000_000, 61.0, 127.0, 148.0, rss=2600.0), _run(5_000_000, 60.0, 126.0, 112.0, rss=2650.0),
            _run(5_000_000, 62.0, 130.0, 120.0, rss=2620.0))
    median = scaling._median_run(runs)
    assert median["figure_s"] == 312.0 and median["components_s"]["Trainer"] == 120.0
    assert median["peak_rss_mb"] == 2650.0 and median["wall_s"] == 322.0
    assert median["runs_figure_s"] == [336.0, 298.0, 312.0]
    assert [r["Trainer"] for r in median["runs_components_s"]] == [148.0, 112.0, 120.0]
    # an even number of runs: the lower of the middle two, a run that happened
    assert scaling._median_run(runs[:2])["figure_s"] == 298.0


def test_a_cost_per_row_that_grows_misses_the_target():
    flat = [scaling._median_run((_run(rows, rows / 1e5, 10 + rows / 4e4, 5 + rows / 5e4),))
            for rows in scaling.SIZES]
    assert abs(scaling._ratio(flat) - 1.0) < 1e-9
    # Transform's seconds per row 10% higher from 1M to 5M: the judge bites
    extra = 0.1 * (5_000_000 - 1_000_000) / 4e4
    grown = flat[:-1] + [scaling._median_run((_run(5_000_000, 50.0, 10 + 5_000_000 / 4e4 + extra,
                                                   5 + 5_000_000 / 5e4),))]
    assert scaling._ratio(grown) > scaling.COST_TARGET
    assert round(scaling._ratio(grown, "Transform"), 6) == 1.1
