"""Every feature transform a spec can name, in one table: what the column must hold, the options it
takes (with their defaults) and which option gives the number of ids it outputs. The spec checks
names and options against it, ExampleGen learns from it which columns must be numbers, Transform's
feature description which ids have a known cardinality; components.transform.preprocessing
implements each entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NUMBER = "number"
TEXT = "text"


@dataclass(frozen=True)
class Transform:
    """``options``: option -> default, None for an option the spec must give. ``cardinality``: the
    option whose value is the number of ids the transform outputs (a vocabulary's is its size plus
    its `oov_buckets`, known only after Transform ran)."""

    reads: str  # NUMBER or TEXT: what the column's values must be
    options: Mapping[str, Any] = field(default_factory=dict)
    cardinality: str | None = None


TRANSFORMS: dict[str, Transform] = {
    "zscore": Transform(NUMBER),
    "minmax": Transform(NUMBER),
    "log": Transform(NUMBER),
    "bucketize": Transform(NUMBER, {"buckets": 10}, cardinality="buckets"),
    "vocabulary": Transform(TEXT, {"top_k": 0, "oov_buckets": 1, "frequency_threshold": 0}),
    "hash": Transform(TEXT, {"buckets": None}, cardinality="buckets"),
    "identity": Transform(NUMBER),
    "categorical": Transform(NUMBER, {"num_buckets": None}, cardinality="num_buckets"),
}

# every option of any transform, in a stable order
OPTIONS: tuple[str, ...] = tuple(sorted({option for t in TRANSFORMS.values() for option in t.options}))


def taking(option: str) -> list[str]:
    """The transforms that take ``option``."""
    return [name for name, transform in TRANSFORMS.items() if option in transform.options]
