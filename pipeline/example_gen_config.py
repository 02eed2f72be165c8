"""The `data` section -> what tfxd's ExampleGen takes: input base, input/output configs, reader config."""

from __future__ import annotations

import ast
import glob
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pipeline import expressions
from pipeline.data_columns import column_uses, known_columns
from pipeline.errors import format_path
from pipeline.load import LoadedSpec

# transforms that read a column as text; every other transform reads numbers
TEXT_TRANSFORMS = ("vocabulary", "hash")
# expression functions whose arguments are numbers (pipeline.expressions.FUNCTIONS but `where`)
NUMBER_FUNCTIONS = ("abs", "log", "exp", "sqrt", "min", "max")


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
              "project": project, **data_checks(loaded)}
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


def data_checks(loaded: LoadedSpec) -> dict[str, Any]:
    """What ExampleGen checks in the data for the spec (keys present only where there is something):
    ``numeric``: columns read as numbers, where words are bad records rather than a string column;
    ``label``: a label column whose values must be classes of its task; ``needs``: column -> where the
    spec reads it, for data whose columns `tfxd validate` could not read."""
    checks: dict[str, Any] = {}
    numeric = sorted(_numeric_columns(loaded))
    if numeric:
        checks["numeric"] = numeric
    label = loaded.spec.label
    if label.column and label.task != "regression" and not loaded.spec.preprocessing_fn:
        checks["label"] = {"column": label.column, "task": label.task, "num_classes": label.num_classes}
    if known_columns(loaded) is None:
        checks["needs"] = needed_columns(loaded)
    return checks


def _numeric_columns(loaded: LoadedSpec) -> set[str]:
    spec = loaded.spec
    if spec.preprocessing_fn:
        return set()
    columns = {f.name for f in spec.features if not f.expr and f.transform not in TEXT_TRANSFORMS}
    for text in [f.expr for f in spec.features if f.expr] + ([spec.label.expr] if spec.label.expr else []):
        columns |= numeric_in_expression(text)
    if spec.label.column and spec.label.task in ("binary", "regression"):
        columns.add(spec.label.column)
    return columns


def numeric_in_expression(text: str) -> set[str]:
    """The columns an expression reads as numbers: operands of arithmetic, of `not`/`and`/`or` and of
    number functions, and columns compared with a number (as components.transform.expressions_tf
    compiles them)."""
    names: set[str] = set()
    for node in ast.walk(expressions.parse(text)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if not any(_is_number(operand) for operand in operands):
                continue
        else:
            operands = _number_operands(node)
        names |= {operand.id for operand in operands if isinstance(operand, ast.Name)}
    return names


def _number_operands(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.BinOp):
        return [node.left, node.right]
    if isinstance(node, ast.UnaryOp):
        return [node.operand]
    if isinstance(node, ast.BoolOp):
        return list(node.values)
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in NUMBER_FUNCTIONS:
        return list(node.args)
    return []


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float))
    if isinstance(node, ast.UnaryOp):
        return not isinstance(node.op, ast.Not)
    return isinstance(node, ast.BinOp) or (
        isinstance(node, ast.Call) and getattr(node.func, "id", None) in NUMBER_FUNCTIONS)


def needed_columns(loaded: LoadedSpec) -> dict[str, str]:
    """Column -> the first place the spec reads it."""
    needs: dict[str, str] = {}
    for path, column, _ in column_uses(loaded.spec):
        needs.setdefault(column, format_path(path))
    return needs
