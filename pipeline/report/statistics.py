"""The data statistics of report.html: per split, per feature tables read from StatisticsGen's
Split-<name>/FeatureStats.pb with the tensorflow_metadata protos alone (plain protobuf: no TensorFlow,
except to list or read a bucket a summary points to)."""

from __future__ import annotations

from typing import Any

from tfxd.files import file_reader, join
from tfxd.pipeline.report.markup import escape, fmt, table, text

STATS_FILE = "FeatureStats.pb"  # tfx.components.statistics_gen.executor.DEFAULT_FILE_NAME in TFX 1.16
SPLIT_PREFIX = "Split-"  # tfx.types.artifact_utils.get_split_uri lays splits out as Split-<name>
TOP_VALUES = 5


def section(folder: Any, split_order: list[str]) -> str:
    """Per split, per feature tables read from StatisticsGen's Split-<name>/FeatureStats.pb."""
    out = ["<h3>Feature statistics</h3>"]
    if not folder:
        out.append('<p class="muted">No statistics artifact recorded (StatisticsGen did not run).</p>')
        return "\n".join(out)
    folder = str(folder)
    try:
        names = _list_dir(folder)
    except Exception as error:
        out.append(f'<p class="muted">Statistics folder <span class="mono">{escape(folder)}</span> '
                   f"could not be read: {escape(error)}</p>")
        return "\n".join(out)
    splits = [n[len(SPLIT_PREFIX):] for n in names if n.startswith(SPLIT_PREFIX)]
    rank = {name: i for i, name in enumerate(split_order)}
    splits.sort(key=lambda s: (rank.get(s, len(rank)), s))
    if not splits:
        out.append(f'<p class="muted">No Split-* folders in <span class="mono">{escape(folder)}</span>.</p>')
    for split in splits:
        path = join(folder, SPLIT_PREFIX + split, STATS_FILE)
        out.append(f"<h3>Split {escape(split)}</h3>")
        try:
            stats = _load_stats(path)
        except Exception as error:
            out.append(f'<p class="muted">Statistics <span class="mono">{escape(path)}</span> '
                       f"could not be read: {escape(type(error).__name__)}: {escape(error)}</p>")
            continue
        for dataset in stats.datasets:
            out.append(_dataset_tables(dataset))
    return "\n".join(out)


def _list_dir(folder: str) -> list[str]:
    return [name.rstrip("/") for name in file_reader(folder).listdir(folder)]  # a bucket's when a summary points there


def _load_stats(path: str):
    """Parse the plain binary DatasetFeatureStatisticsList, as tfdv.load_stats_binary does."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    with file_reader(path).open(path, "rb") as handle:
        data = handle.read()
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    stats.ParseFromString(data)
    return stats


def _dataset_tables(dataset) -> str:
    """A numeric table (min/mean/std/max) and a string table (unique, top values) for one split."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    type_name = statistics_pb2.FeatureNameStatistics.Type.Name
    examples = dataset.num_examples or dataset.weighted_num_examples
    numeric, strings, other = [], [], []
    for feature in dataset.features:
        name = ".".join(feature.path.step) if feature.path.step else feature.name
        kind = feature.WhichOneof("stats")
        common = _common_stats(feature, kind)
        count = common.num_non_missing if common is not None else 0
        missing = common.num_missing if common is not None else 0
        total = examples or (count + missing)
        pct = f"{missing / total * 100:.1f}%" if total else "&mdash;"
        head = [(escape(name), False), (escape(type_name(feature.type)), False), (fmt(count), True),
                (fmt(missing), True), (pct, True)]
        if kind == "num_stats":
            s = feature.num_stats
            numeric.append(head + [(fmt(s.min), True), (fmt(s.mean), True), (fmt(s.std_dev), True),
                                   (fmt(s.max), True), (fmt(s.num_zeros), True)])
        elif kind == "string_stats":
            s = feature.string_stats
            top = ", ".join(f"{escape(text(v.value))} ({fmt(v.frequency)})" for v in s.top_values[:TOP_VALUES])
            strings.append(head + [(fmt(s.unique), True), (top or "&mdash;", False)])
        else:
            other.append(head + [(escape(kind or "none"), False)])
    out = [f"<p>{fmt(examples)} examples, {len(dataset.features)} features.</p>"]
    base = ["feature", "type", "count", "missing", "missing %"]
    if numeric:
        out.append(table(base + ["min", "mean", "std", "max", "zeros"], numeric))
    if strings:
        out.append(table(base + ["unique", f"top values (up to {TOP_VALUES})"], strings))
    if other:
        out.append(table(base + ["statistics"], other))
    if not (numeric or strings or other):
        out.append('<p class="muted">No features in this split\'s statistics.</p>')
    return "\n".join(out)


def _common_stats(feature, kind: str | None):
    if kind in ("num_stats", "string_stats"):
        return getattr(feature, kind).common_stats
    if kind == "bytes_stats":
        return feature.bytes_stats.common_stats
    if kind == "struct_stats":
        return feature.struct_stats.common_stats
    return None
