"""`make bench`: run every benchmark, write bench/results/<name>.json and bench/RESULTS.md.

`python bench/run.py NAME...` runs some of them (their JSON only: RESULTS.md is written by a full run,
so that every figure in it comes from the same invocation); `--quick` is a smoke run of the harness
with small sizes, written nowhere.

A run exits 1 when a figure misses its target, naming each; `--check` runs nothing and judges the results
the last run left in bench/results/ the same way (a benchmark with no result there is a miss too).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# in the order: CLI latency, end to end, input pipeline, strategy choice, scaling, GPU; then Beam's engines
NAMES = ["cli_latency", "example_gen", "transform", "e2e_taxi", "evaluator", "input_pipeline", "strategies", "scaling", "gpu",
         "beam_engines", "buckets", "faults", "reliability"]
# figures that, run alone, update their part of RESULTS.md: counts, which compare nothing side by side, and
# the faults, whose every figure has its baseline inside the same benchmark
SPLICED = {"faults": ("| Faults:", "### Faults"), "reliability": ("| Reliability:", "### Reliability")}
HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def _versions() -> str:
    names = ["tfxd", "tfx", "tensorflow", "apache-beam", "pydantic", "ruamel.yaml"]
    return ", ".join(f"{n} {importlib.metadata.version(n)}" for n in names)


def core_seconds() -> float:
    """One core's speed, for comparing absolute figures across runs on machines of the same kind: the fastest
    of three runs of 10^7 Python additions in a function (the same machines' speed has moved by up to 1.8x
    from day to day, and the absolute figures with it)."""
    best = float("inf")
    for _ in range(3):
        start, total = time.perf_counter(), 0
        for i in range(10**7):
            total += i
        best = min(best, time.perf_counter() - start)
    return best


def _results_md(rows: list[str], sections: list[str], minutes: float, core: float) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}"
    return "\n".join([
        "# Benchmark results",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- machine: {machine}; one core: 10^7 Python additions in {core:.2f} s at the start (bench/run.py, "
        "core_seconds: the absolute figures below move with it)",
        f"- versions: {_versions()}",
        f"- `make bench` took {minutes:.0f} min; every figure is measured side by side with its baseline in this "
        "same run (alternating where both sides run)",
        "",
        "| figure | tfxd | baseline | ratio (median, min, max) | target |",
        "|---|---|---|---|---|",
        *rows,
        "",
        *[section + "\n" for section in sections],
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run: {', '.join(NAMES)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="a smoke run with small sizes; writes nothing")
    parser.add_argument("--check", action="store_true",
                        help="run nothing: judge the results in bench/results/ against their targets")
    args = parser.parse_args()
    names = args.names or NAMES
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    if args.check:
        sys.exit(_report(_stored(names)))
    start = time.monotonic()
    core = core_seconds()
    results = []
    rows, sections = [], []
    for name in names:
        bench = importlib.import_module(name)
        print(f"> {name}", flush=True)
        result = bench.run(quick=args.quick)
        results.append(result)
        if not args.quick:
            os.makedirs(RESULTS, exist_ok=True)
            with open(os.path.join(RESULTS, f"{name}.json"), "w") as handle:
                json.dump(result, handle, indent=2)
        rows.extend(bench.table_rows(result))
        if hasattr(bench, "details"):
            sections.append(bench.details(result))
        print("\n".join(bench.table_rows(result)), flush=True)
    text = _results_md(rows, sections, (time.monotonic() - start) / 60, core)
    if names == NAMES and not args.quick:
        _write_results(text.split("\n"), _results_parts()[1])
    elif set(names) <= set(SPLICED) and not args.quick:
        _splice(rows, sections, names)
    print(text)
    if not args.quick:
        sys.exit(_report([(name, result.get("targets")) for name, result in zip(names, results, strict=True)]))


def _stored(names: list[str], folder: str = RESULTS) -> list[tuple[str, list[dict] | None]]:
    """Each benchmark's targets as its last run recorded them (None: no result, or one without targets)."""
    stored = []
    for name in names:
        path = os.path.join(folder, f"{name}.json")
        if not os.path.exists(path):
            stored.append((name, None))
            continue
        with open(path) as handle:
            stored.append((name, json.load(handle).get("targets")))
    return stored


def _report(judged: list[tuple[str, list[dict] | None]]) -> int:
    """Print every missed target, naming its benchmark and figure; 1 if any was missed, else 0."""
    missed = [f"{name}: no result with targets in bench/results/{name}.json; run `python bench/run.py {name}`"
              for name, targets in judged if targets is None]
    missed += [f"{name}: {t['figure']}: {t['wanted']}: NOT met" for name, targets in judged for t in targets or []
               if not t["met"]]
    met = sum(t["met"] for _, targets in judged for t in targets or [])
    for line in missed:
        print(f"MISSED {line}", file=sys.stderr)
    print(f"targets met: {met}; missed: {len(missed)}", file=sys.stderr)
    return 1 if missed else 0


def _splice(rows: list[str], sections: list[str], names: list[str]) -> None:
    """Replace the rows and the section of ``names`` in RESULTS.md, leaving every other figure as it was."""
    lines, hand_written = _results_parts()
    for name in names:
        row_prefix, heading = SPLICED[name]
        kept = [line for line in lines if not line.startswith(row_prefix)]
        last_row = max(i for i, line in enumerate(kept) if line.startswith("| ") and i < _first_section(kept))
        kept[last_row + 1:last_row + 1] = [r for r in rows if r.startswith(row_prefix)]
        if heading in kept:
            start = kept.index(heading)
            end = next((i for i in range(start + 1, len(kept)) if kept[i].startswith("### ")), len(kept))
            del kept[start:end]
        kept += [s for s in sections if s.startswith(heading)] + [""]
        lines = kept
    _write_results(lines, hand_written)


# RESULTS.md's last section, written by hand: the figures behind the code's comments, kept by every write
WHY_HEADING = "## Why the code is as it is: figures behind the comments"


def _results_parts() -> tuple[list[str], str]:
    """RESULTS.md as (its lines before the hand-written section: what runs of the benchmarks write, that
    section as it is)."""
    with open(os.path.join(HERE, "RESULTS.md")) as handle:
        measured, heading, hand_written = handle.read().partition(WHY_HEADING)
    return measured.rstrip("\n").split("\n"), heading + hand_written


def _write_results(measured: list[str], hand_written: str) -> None:
    """RESULTS.md: ``measured``, then the hand-written section."""
    with open(os.path.join(HERE, "RESULTS.md"), "w") as handle:
        handle.write("\n".join(measured).rstrip("\n") + "\n" + (f"\n{hand_written}" if hand_written else ""))


def _first_section(lines: list[str]) -> int:
    return next((i for i, line in enumerate(lines) if line.startswith("### ")), len(lines))


if __name__ == "__main__":
    main()
