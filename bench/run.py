"""`make bench`: run every benchmark, write bench/results/<name>.json and bench/RESULTS.md."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_latency  # noqa: E402

BENCHMARKS = [cli_latency]
HERE = os.path.dirname(os.path.abspath(__file__))


def _versions() -> str:
    names = ["tfxd", "tfx", "tensorflow", "apache-beam", "pydantic", "ruamel.yaml"]
    return ", ".join(f"{n} {importlib.metadata.version(n)}" for n in names)


def main() -> None:
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    rows = []
    for bench in BENCHMARKS:
        print(f"> {bench.__name__}", flush=True)
        result = bench.run()
        with open(os.path.join(HERE, "results", f"{result['name']}.json"), "w") as handle:
            json.dump(result, handle, indent=2)
        rows.extend(bench.table_rows(result))
        print("\n".join(rows[-1:]), flush=True)
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}"
    text = "\n".join([
        "# Benchmark results",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- machine: {machine}",
        f"- versions: {_versions()}",
        "- each figure is measured side by side with its baseline in the same run (alternating)",
        "",
        "| figure | tfxd | baseline | ratio (median, min, max) | target |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ])
    with open(os.path.join(HERE, "RESULTS.md"), "w") as handle:
        handle.write(text)
    print(text)


if __name__ == "__main__":
    main()
