"""The `data` section -> what tfxd's ExampleGen takes: input base, input/output configs, reader config."""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pipeline.load import LoadedSpec


@dataclass(frozen=True)
class ExampleGenConfig:
    input_base: str | None  # None for bigquery
    input_splits: list[tuple[str, str]]  # (name, pattern relative to input_base, or the query)
    output_buckets: list[tuple[str, int]]  # (name, hash buckets); empty for pattern splits
    reader: dict[str, Any]
    split_key: str | None


def hash_buckets(ratios: dict[str, float]) -> list[tuple[str, int]]:
    """Ratios -> the smallest whole numbers of hash buckets in the same proportions (0.8/0.2 -> 4/1)."""
    fractions = {name: Fraction(ratio).limit_denominator(10_000) for name, ratio in ratios.items()}
    denominator = math.lcm(*(f.denominator for f in fractions.values()))
    counts = {name: int(f * denominator) for name, f in fractions.items()}
    divisor = math.gcd(*counts.values())
    return [(name, count // divisor) for name, count in counts.items()]


def _base_and_pattern(path: str) -> tuple[str, str]:
    """A file, directory or glob -> (the directory to watch, a pattern under it)."""
    if glob.has_magic(path):
        parts = path.split("/")
        fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
        return "/".join(parts[:fixed]) or "/", "/".join(parts[fixed:])
    if "://" not in path and os.path.isdir(path):
        return path, "*"
    return os.path.dirname(path), os.path.basename(path)


def example_gen_config(loaded: LoadedSpec, project: str | None = None) -> ExampleGenConfig:
    data = loaded.spec.data
    reader = {"format": data.format, "columns": dict(data.columns), "bad_records": data.bad_records,
              "project": project}
    ratios = {name: value for name, value in data.splits.items() if not isinstance(value, str)}
    if data.format == "bigquery":
        return ExampleGenConfig(None, [("single_split", data.query or "")], hash_buckets(ratios), reader,
                                data.split_key)
    path = loaded.resolve(data.path or "")
    if ratios:
        base, pattern = _base_and_pattern(path)
        return ExampleGenConfig(base, [("single_split", pattern)], hash_buckets(ratios), reader, data.split_key)
    base = path.rstrip("/")
    return ExampleGenConfig(base, [(name, str(pattern)) for name, pattern in data.splits.items()], [], reader, None)
