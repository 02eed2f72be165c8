"""The classes of a multiclass label, read off StatisticsGen's statistics of each split, before Transform.

A string class that the eval split has and the train split lacks gets id -1 from Transform's vocabulary
(built on train), which the Trainer's loss cannot take and the model could never predict; more classes in
train than `label.num_classes` leave no output for some of them. Both are mistakes in the data or the
spec that the statistics already show, so ExampleValidator names them, with the split, the values and the
fix, instead of a Trainer crash or a silently wrong model.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

SHOWN = 5  # the classes named in a message


def classes(statistics, column: str) -> tuple[dict[str, int], int] | None:
    """({class: records} as far as the statistics list them, the number of distinct classes) of a string
    label ``column`` in one split's statistics; None when the column holds no strings."""
    for feature in statistics.datasets[0].features:
        name = ".".join(feature.path.step) or feature.name
        if name != column or not feature.HasField("string_stats"):
            continue
        stats = feature.string_stats
        listed = {bucket.label: int(bucket.sample_count) for bucket in stats.rank_histogram.buckets}
        if len(listed) < stats.unique:
            listed.update({value.value: int(value.frequency) for value in stats.top_values})
        return listed, int(stats.unique)
    return None


def problems(label: dict[str, Any], by_split: dict[str, tuple[dict[str, int], int]]) -> list[str]:
    """What is wrong with the classes of ``label`` (its column, num_classes) split by split."""
    column, wanted = label["column"], label["num_classes"]
    found = []
    train = by_split.get("train")
    if train is not None and train[1] > wanted:
        found.append(f"label column {column!r} has {train[1]} classes in the train split, more than "
                     f"label.num_classes {wanted}: raise label.num_classes to {train[1]}, or fix the data")
    if train is None or not complete({"train": train}):
        return found  # the statistics do not list every train class (from_examples() reads them all)
    for split, (listed, _) in sorted(by_split.items()):
        unseen = {value: count for value, count in listed.items() if split != "train" and value not in train[0]}
        if unseen:
            names = ", ".join(f"{value!r} ({count} records)" for value, count in sorted(unseen.items())[:SHOWN])
            more = f" and {len(unseen) - SHOWN} more" if len(unseen) > SHOWN else ""
            found.append(f"label column {column!r}: class {names}{more} appears in the {split} split but never in "
                         "train, so the model cannot learn it (Transform would give it id -1); put records of "
                         "every class in train (ratio splits do; check the file-pattern splits), or drop those "
                         "records")
    return found


def complete(by_split: dict[str, tuple[dict[str, int], int]]) -> bool:
    """Whether the statistics list every class of every split (TFDV keeps a bounded histogram: a label with
    more classes than it keeps is listed only in part)."""
    return all(len(listed) >= unique for listed, unique in by_split.values())


def from_examples(examples, column: str) -> dict[str, tuple[dict[str, int], int]]:
    """The classes of a string label ``column`` counted in the examples themselves, split by split (the
    gzipped TFRecords of tf.Example ExampleGen wrote), for when the statistics list them only in part."""
    import tensorflow as tf
    from tfx.dsl.io import fileio
    from tfx.types import artifact_utils

    by_split = {}
    for split in artifact_utils.decode_split_names(examples.split_names):
        paths = sorted(fileio.glob(os.path.join(artifact_utils.get_split_uri([examples], split), "*")))
        counts: Counter[str] = Counter()
        for record in tf.data.TFRecordDataset(paths, compression_type="GZIP").as_numpy_iterator():
            feature = tf.train.Example.FromString(record).features.feature.get(column)
            if feature is not None:
                counts.update(value.decode("utf-8", "replace") for value in feature.bytes_list.value)
        by_split[split] = (dict(counts), len(counts))
    return by_split
