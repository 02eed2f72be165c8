"""What each component is told: ExampleGen's input base, splits and reader config (with the checks it makes
in the data for the spec), Transform's and the Trainer's custom_config, and the columns the anomaly gate
watches."""

from __future__ import annotations

import ast
import glob
import math
import os
import posixpath
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tfxd import expressions, keys, spans
from tfxd.files import is_uri
from tfxd.formats import FORMATS
from tfxd.pipeline.spec.data_files import column_uses
from tfxd.pipeline.spec.errors import format_path
from tfxd.pipeline.spec.loaded import LoadedSpec
from tfxd.pipeline.spec.targets import duration_seconds
from tfxd.reader_config import LabelCheck, ReaderConfig, SpanReading
from tfxd.trainer_config import OperatorSettings, ProcessCluster, TrainerCustomConfig
from tfxd.transforms import NUMBER, TRANSFORMS

# The sections of the spec the Trainer reads: the rest (evaluation, push, targets...) can change
# without retraining.
TRAINER_SECTIONS = ("tfxd", "name", "features", "preprocessing_fn", "label", "model", "training")


@dataclass(frozen=True)
class ExampleGenConfig:
    input_base: str | None  # None for bigquery
    input_splits: list[tuple[str, str]]  # (name, pattern relative to input_base, or the query)
    output_buckets: list[tuple[str, int]]  # (name, hash buckets); empty for pattern splits
    reader: ReaderConfig
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
    if not is_uri(path) and os.path.isdir(path):
        return path, "*"
    return os.path.dirname(path), os.path.basename(path)


def example_gen_config(loaded: LoadedSpec, project: str | None = None) -> ExampleGenConfig:
    data = loaded.spec.data
    numeric, label, needs = data_checks(loaded)
    reader = ReaderConfig(format=data.format, bad_records=data.bad_records, columns=dict(data.columns),
                          project=project, numeric=numeric, label=label, needs=needs)
    if not FORMATS[data.format].files:
        return ExampleGenConfig(None, [("single_split", data.query or "")], hash_buckets(data.ratios), reader,
                                data.split_key)
    path = loaded.resolve(data.path or "")
    if data.span_pattern is not None:
        return _span_example_gen_config(loaded, path, reader)
    if data.ratios:
        base, pattern = _base_and_pattern(path)
        return ExampleGenConfig(base, [("single_split", pattern)], hash_buckets(data.ratios), reader,
                                data.split_key)
    return ExampleGenConfig(path.rstrip("/"), list(data.patterns.items()), [], reader, None)


def _span_example_gen_config(loaded: LoadedSpec, path: str, reader: ReaderConfig) -> ExampleGenConfig:
    """A path with spans: the executor picks the spans (tfxd.spans) and reads their files; TFX is given the
    folder before the first placeholder and every span's files as a wildcard, which its driver
    fingerprints. The reader's ``spans`` gets the pattern itself from the assembly, placed for the target."""
    data = loaded.spec.data
    pattern = spans.SpanPattern.parse(path)
    everything = spans.PLACEHOLDER.sub("*", path)[len(pattern.base):].strip("/")
    reader = reader.with_spans(SpanReading(data.span_choice(), data.on_no_new_data, data.patterns))
    if data.ratios:
        return ExampleGenConfig(pattern.base, [("single_split", everything)], hash_buckets(data.ratios), reader,
                                data.split_key)
    splits = [(name, posixpath.join(everything, split_pattern)) for name, split_pattern in data.patterns.items()]
    return ExampleGenConfig(pattern.base, splits, [], reader, None)


def data_checks(loaded: LoadedSpec) -> tuple[tuple[str, ...], LabelCheck | None, dict[str, str] | None]:
    """What ExampleGen checks in the data for the spec (tfxd.reader_config.ReaderConfig says what each is):
    the columns read as numbers, the label's classes (None when nothing to check), the columns the spec
    needs (None when `tfxd validate` could read the data's columns)."""
    label = loaded.spec.label
    check_label = label.task != "regression" and not loaded.spec.preprocessing_fn
    return (tuple(sorted(_numeric_columns(loaded))),
            LabelCheck(label.column, label.task, label.num_classes) if label.column and check_label else None,
            needed_columns(loaded) if loaded.data_files.columns is None else None)


def _numeric_columns(loaded: LoadedSpec) -> set[str]:
    spec = loaded.spec
    if spec.preprocessing_fn:
        return set()
    columns = {f.name for f in spec.features if not f.expr and TRANSFORMS[f.transform].reads == NUMBER}
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
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in expressions.NUMBER_FUNCTIONS:
        return list(node.args)
    return []


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float))
    if isinstance(node, ast.UnaryOp):
        return not isinstance(node.op, ast.Not)
    return isinstance(node, ast.BinOp) or (
        isinstance(node, ast.Call) and getattr(node.func, "id", None) in expressions.NUMBER_FUNCTIONS)


def needed_columns(loaded: LoadedSpec) -> dict[str, str]:
    """Column -> the first place the spec reads it."""
    needs: dict[str, str] = {}
    for path, column, _ in column_uses(loaded.spec):
        needs.setdefault(column, format_path(path))
    return needs


def transform_config(loaded: LoadedSpec) -> dict[str, Any]:
    """What the generic preprocessing_fn reads: the features and the label, every default filled in."""
    spec = loaded.spec
    return {keys.FEATURES: [feature.model_dump(mode="json") for feature in spec.features],
            keys.LABEL: spec.label.model_dump(mode="json")}


def trainer_config(loaded: LoadedSpec, cluster: ProcessCluster | None) -> TrainerCustomConfig:
    """What run_fn reads: the resolved spec, the local cluster, and the columns only the label reads."""
    spec = loaded.spec
    label_only = sorted(_label_columns(loaded) - _feature_columns(loaded)) if spec.features else []
    return TrainerCustomConfig(spec.model_dump(mode="json", by_alias=True, include=set(TRAINER_SECTIONS)),
                               cluster, tuple(label_only))


def operator_settings(pipeline: str, kubeflow) -> OperatorSettings:
    """targets.kubeflow.trainer as an operator's launcher reads it (components/trainer/operator_job.py)."""
    trainer = kubeflow.trainer
    return OperatorSettings(**trainer.model_dump(mode="json"), image=kubeflow.image, pipeline=pipeline,
                            timeout_seconds=duration_seconds(trainer.timeout))


def columns_read(loaded: LoadedSpec) -> list[str]:
    """The data columns the spec's features and label read ([] with a user preprocessing_fn: unknown)."""
    if loaded.spec.preprocessing_fn:
        return []
    return sorted(_feature_columns(loaded) | _label_columns(loaded))


def _feature_columns(loaded: LoadedSpec) -> set[str]:
    return {column for path, column, _ in column_uses(loaded.spec) if path[0] == "features"}


def _label_columns(loaded: LoadedSpec) -> set[str]:
    return {column for path, column, _ in column_uses(loaded.spec) if path[0] == "label"}
