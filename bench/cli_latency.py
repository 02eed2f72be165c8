"""CLI latency: `tfxd validate examples/taxi.yaml` against `python -c pass`, same venv, alternating.

Target (issue 2 / 7): under 0.5 s median for validate.
"""

from __future__ import annotations

import subprocess
import sys
import time

import common

RUNS = 20
TARGET_S = 0.5


def _time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=common.REPO)
    return time.perf_counter() - start


def run(quick: bool = False) -> dict:
    validate = [common.TFXD, "validate", "examples/taxi.yaml"]
    baseline = [sys.executable, "-c", "pass"]
    _time(validate)  # warm the file cache once, for both
    _time(baseline)
    a, b = [], []
    runs = 3 if quick else RUNS
    for _ in range(runs):
        a.append(_time(validate))
        b.append(_time(baseline))
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    validate_stats = common.stats(a)
    return {
        "name": "cli_latency",
        "runs": runs,
        "validate_s": validate_stats,
        "python_pass_s": common.stats(b),
        "ratio": common.stats(ratios),
        "targets": [common.target("CLI latency", f"validate median < {TARGET_S} s", validate_stats["median"] < TARGET_S)],
    }


def table_rows(result: dict) -> list[str]:
    v, p, r = result["validate_s"], result["python_pass_s"], result["ratio"]
    return [f"| CLI latency: `tfxd validate examples/taxi.yaml` vs `python -c pass` ({result['runs']} runs) "
            f"| {v['median']:.3f} s (min {v['min']:.3f}, max {v['max']:.3f}) "
            f"| {p['median']:.3f} s | {r['median']:.1f}x (min {r['min']:.1f}, max {r['max']:.1f}) "
            f"| {common.judged(result['targets'][0])} |"]
