"""The analyzers of the generic preprocessing_fn, each over all the features that need it at once.

tf.Transform builds Beam stages per analyzer call, so with one call per feature those stages, not the data,
were most of Transform's time (30 z-scores: 30 means and 30 variances). Here every single-valued numeric feature
is a column of one stacked matrix, and each figure (mean, variance, min, max, quantile boundaries) comes from
one analyzer over its columns with ``reduce_instance_dims=False``: tf.Transform reduces each column on its own,
so each feature's figure is the one an analyzer of its own would give.

Every vocabulary (of features and of a label's string classes) comes from one analyzer too (``vocabularies``):
tf.Transform has none that computes several vocabularies, each with its own top_k, frequency threshold and file,
so it is a Beam PTransform of tfxd's through tf.Transform's own ``ptransform_analyzer``, which writes each file
as tft.vocabulary writes it (same tokens, order, empty-vocabulary token, file name and registered name).

Not combined: the figures of fixed-length list features (reduced over all their values; rare, so they keep
analyzers of their own, see preprocessing._filled).
"""
from __future__ import annotations

import heapq
import math
import operator
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import analyzer_nodes, tf_utils
from tensorflow_transform import analyzers as tft_analyzers
from tensorflow_transform.beam import experimental as tft_beam_experimental

NUMERIC = ("zscore", "minmax", "log", "bucketize", "categorical", "identity")


class Statistics:
    """The mean, variance, min, max and quantile boundaries of every single-valued numeric feature, from one
    analyzer per figure over all of them stacked as columns (one quantiles analyzer per bucket count: it
    takes one count for all its columns). NaN stands for a missing value: mean, variance and quantiles pass
    over it, so each column's figures are over the values present, as the analyzers of one feature over its
    present values; min and max see it as +inf / -inf."""

    def __init__(self, features: list[dict[str, Any]], raws: dict[str, tf.Tensor]) -> None:
        self._index: dict[str, int] = {}
        columns: list[tf.Tensor] = []
        by_buckets: dict[int, list[str]] = {}
        for feature in features:
            name, raw = feature["name"], raws[feature["name"]]
            if feature["transform"] in NUMERIC and raw.dtype != tf.string and raw.shape.rank == 1:
                self._index[name] = len(columns)
                columns.append(analyzed(tf.cast(raw, tf.float64), feature.get("fill")))
                if feature["transform"] == "bucketize":
                    by_buckets.setdefault(feature["buckets"], []).append(name)
        # each figure's vector is split into the features' scalars by one op (one slice per feature and
        # figure was a quarter of a transform graph's ops, each traced, written and loaded again)
        self._figures: dict[str, list[tf.Tensor]] = {}
        self._boundaries: dict[str, tf.Tensor] = {}
        if not columns:
            return
        stacked = tf.stack(columns, axis=1)
        vectors = {"mean": _columnwise(tft.mean, stacked), "variance": _columnwise(tft.var, stacked)}
        if any(feature["transform"] == "minmax" and feature["name"] in self._index for feature in features):
            # unlike mean and var, min and max keep NaN: a missing value is made one they pass over
            missing = tf.math.is_nan(stacked)
            vectors["min"] = _columnwise(tft.min, tf.where(missing, tf.constant(math.inf, tf.float64), stacked))
            vectors["max"] = _columnwise(tft.max, tf.where(missing, tf.constant(-math.inf, tf.float64), stacked))
        self._figures = {figure: tf.unstack(vector, num=len(columns)) for figure, vector in vectors.items()}
        for buckets, names in sorted(by_buckets.items()):
            matrix = tf.stack([columns[self._index[name]] for name in names], axis=1)
            # [1, buckets - 1] each: one feature's boundaries, as tft.apply_buckets takes them
            rows = tf.split(_quantiles(matrix, buckets), len(names), axis=0)
            self._boundaries.update(zip(names, rows, strict=True))

    def of(self, name: str) -> dict[str, tf.Tensor] | None:
        """The feature's figures (scalars; its quantile boundaries under "boundaries", shaped [1, buckets - 1]
        for a bucketized one), or None for a feature that is not among the stacked ones."""
        if name not in self._index:
            return None
        i = self._index[name]
        figures = {figure: values[i] for figure, values in self._figures.items()}
        if name in self._boundaries:
            figures["boundaries"] = self._boundaries[name]
        return figures


def epsilon(buckets: int) -> float:
    """The quantiles' error tolerance for ``buckets`` buckets, tft.bucketize's."""
    return min(1.0 / buckets, 0.01)


def _quantiles(matrix: tf.Tensor, buckets: int) -> tf.Tensor:
    """tft.quantiles(matrix, buckets, epsilon(buckets), reduce_instance_dims=False), with its combiner made to
    give a column without any value the zero boundaries tft.quantiles gives one such feature (see
    _QuantilesCombiner)."""
    columns = int(matrix.shape[1])
    combiner = _QuantilesCombiner(buckets, epsilon(buckets), np.float32, output_shape=[columns, buckets - 1],
                                  feature_shape=[columns])
    with tf.compat.v1.name_scope(None, "quantiles"):  # tf.Transform labels an analyzer's nodes by its scope
        (boundaries,) = tft_analyzers.apply_cacheable_combine_operation(combiner, matrix)
        return analyzer_nodes.wrap_as_tensor(boundaries)


class _QuantilesCombiner(tft_analyzers.QuantilesCombiner):
    """tf.Transform's quantiles combiner that also keeps which columns had a value. Its sketch (tfx_bsl's
    QuantilesSketch) leaves a column without any value (every one missing) out of its quantiles, so those of
    the columns after it would no longer line up and tf.Transform would fail to shape them; here such a column
    gets zero boundaries in its place, as tft.quantiles gives a feature of its own without any value."""

    def create_accumulator(self) -> tuple[Any, np.ndarray]:
        return super().create_accumulator(), np.zeros(self._num_features, bool)

    def add_input(self, accumulator: tuple[Any, np.ndarray], next_input: list[np.ndarray]) -> tuple[Any, np.ndarray]:
        sketch, valued = accumulator
        valued = valued | ~np.isnan(np.reshape(next_input[0], [-1, self._num_features])).all(axis=0)
        return super().add_input(sketch, next_input), valued

    def merge_accumulators(self, accumulators: Any) -> tuple[Any, np.ndarray]:
        sketches, valued = zip(*accumulators, strict=True)
        return super().merge_accumulators(sketches), np.logical_or.reduce(valued)

    def compact(self, accumulator: tuple[Any, np.ndarray]) -> tuple[Any, np.ndarray]:
        sketch, valued = accumulator
        return super().compact(sketch), valued

    def extract_output(self, accumulator: tuple[Any, np.ndarray]) -> list[np.ndarray]:
        sketch, valued = accumulator
        quantiles = iter(sketch.GetQuantiles(self._num_quantiles).to_pylist())  # those of valued columns only
        inner = self._num_quantiles - 1  # without the min and the max, as tft.quantiles
        rows = [next(quantiles)[1:-1] if has_values else [0.0] * inner for has_values in valued]
        return [np.reshape(np.array(rows, self._bucket_numpy_dtype), self._output_shape)]


def _columnwise(analyzer: Any, stacked: tf.Tensor) -> tf.Tensor:
    """One figure per column of ``stacked``, as a vector even for one column (tf.Transform hands the
    value of a one-column analyzer back as a scalar)."""
    return tf.reshape(tf.cast(analyzer(stacked, reduce_instance_dims=False), tf.float64), [-1])


def analyzed(values: tf.Tensor, fill: Any) -> tf.Tensor:
    """What the analyzers see: the values with a constant fill in place (it is part of the statistics),
    or with NaN where missing (left out of them)."""
    if fill is None:
        return values
    return tf.where(tf.math.is_nan(values), tf.constant(float(fill), tf.float64), values)


class Vocabulary(NamedTuple):
    """A vocabulary the preprocessing_fn wants: its name (tft.vocabulary's vocab_filename), the strings it is
    computed over, and tft.vocabulary's top_k and frequency_threshold (None: all tokens)."""

    name: str
    strings: tf.Tensor
    top_k: int | None
    frequency_threshold: int | None


def vocabularies(wanted: list[Vocabulary]) -> dict[str, tf.Tensor]:
    """Each vocabulary's file (a deferred path, as tft.vocabulary returns it, for tft.apply_vocabulary) from
    one analyzer over all of them. Each batch is reduced to its tokens and their counts in the graph, with
    tft.vocabulary's own filter (no empty tokens, none with a line break: the file is text); each file is
    registered under its name, as tft.vocabulary registers it (TFTransformOutput.vocabulary_file_by_name).
    Not its size: ptransform_analyzer cannot mix files and numbers among its outputs (tf.Transform 1.16
    makes a temporary file of each), and TFTransformOutput.vocabulary_size_by_name counts the file's lines
    where no size was registered, which is the same number."""
    if not wanted:
        return {}
    regex = tft_analyzers.get_vocab_newline_characters_regex(tf.string, "text")
    inputs: list[tf.Tensor] = []
    for vocabulary in wanted:
        reduced = tf_utils.reduce_batch_weighted_counts(vocabulary.strings, force=True, filter_regex=regex)
        inputs += [reduced.unique_x, reduced.counts_per_x]
    filenames = [tft_analyzers.sanitized_vocab_filename(vocabulary.name) for vocabulary in wanted]
    options = [(filename, vocabulary.top_k, vocabulary.frequency_threshold or 0)
               for filename, vocabulary in zip(filenames, wanted, strict=True)]
    count = len(wanted)
    with tf.compat.v1.name_scope(None, "vocabularies"):
        files = tft.experimental.ptransform_analyzer(
            inputs, _WriteVocabularies(options), output_dtypes=[tf.string] * count, output_shapes=[[]] * count,
            output_asset_default_values=[_TEMPORARY_ASSET_VALUE] * count)
    for vocabulary, filename in zip(wanted, filenames, strict=True):
        tft_analyzers.register_vocab(filename, vocabulary_key=vocabulary.name)
    return {vocabulary.name: file for vocabulary, file in zip(wanted, files, strict=True)}


# what a vocabulary file holds while the preprocessing_fn is traced, before analysis: tft.vocabulary's
# (tensorflow_transform/analyzer_nodes.py, VocabularyOrderAndWrite.output_tensor_infos)
_TEMPORARY_ASSET_VALUE = b"TEMPORARY_ASSET_VALUE"
# the one token of a vocabulary without any, so that a lookup table can be made of it: tft.vocabulary's
_EMPTY_VOCABULARY_TOKEN = tft_analyzers.get_empy_vocabulary_dummy_value(tf.string)[1]


class _WriteVocabularies(tft_beam_experimental.PTransformAnalyzer):
    """Batches of (tokens, counts) per vocabulary -> every vocabulary's file path, each a PCollection of one
    element (what ptransform_analyzer takes).

    Tokens are counted per (vocabulary, token) in one combine; each vocabulary is then pruned (_Pruned) and
    written on its own (a key per vocabulary, so several are written in parallel): as tft.vocabulary, those
    below the frequency threshold dropped, most frequent first, ties in descending byte order of the tokens
    (tf.Transform sorts (count, token) pairs largest first), the first top_k kept; one token per line; a
    vocabulary left without any token holds tf.Transform's empty-vocabulary token."""

    def __init__(self, options: list[tuple[str, int | None, int]]) -> None:
        super().__init__()
        self._options = options

    def expand(self, batches: Any) -> tuple[Any, ...]:
        every = batches.pipeline | "EveryVocabulary" >> beam.Create([(i, None) for i in range(len(self._options))])
        counted = (batches
                   | "Tokens" >> beam.FlatMap(_keyed_counts)
                   | "CountPerToken" >> beam.CombinePerKey(sum)
                   | "ByVocabulary" >> beam.Map(_by_vocabulary))
        written = ((counted, every)
                   | "WithEveryVocabulary" >> beam.Flatten()
                   | "Prune" >> beam.CombinePerKey(_Pruned(self._options))
                   | "Write" >> beam.Map(_write, self._options, self.base_temp_dir)
                   | "Gather" >> beam.combiners.ToList()
                   | "InOrder" >> beam.Map(_in_order))
        return tuple(written | f"Output{i}" >> beam.Map(operator.itemgetter(i)) for i in range(len(self._options)))


def _keyed_counts(batch: list[np.ndarray]) -> Any:
    for i in range(0, len(batch), 2):
        for token, count in zip(batch[i].tolist(), batch[i + 1].tolist(), strict=True):
            yield (i // 2, token), count


def _by_vocabulary(counted: tuple[tuple[int, bytes], int]) -> tuple[int, tuple[int, int, bytes]]:
    (index, token), count = counted
    return index, (index, count, token)


class _Pruned(beam.CombineFn):
    """One vocabulary's (count, token) pairs at or above its frequency threshold, largest first: with a
    top_k only its top_k largest, kept in a heap of that size while they are combined (memory bounded by
    top_k, as tft.vocabulary's Top.Of keeps it), else all of them (as tft.vocabulary gathers them). Its
    inputs are (index, count, token), or None (the marker that makes every vocabulary a key)."""

    def __init__(self, options: list[tuple[str, int | None, int]]) -> None:
        self._options = options

    def create_accumulator(self) -> list[Any]:
        return [None, []]  # [the vocabulary's index once seen, its pairs]

    def add_input(self, kept: list[Any], counted: tuple[int, int, bytes] | None) -> list[Any]:
        if counted is None:
            return kept
        index, count, token = counted
        _, top_k, threshold = self._options[index]
        if count < threshold:
            return kept
        kept[0], pairs, pair = index, kept[1], (count, token)
        if top_k is None:
            pairs.append(pair)
        elif len(pairs) < top_k:
            heapq.heappush(pairs, pair)
        elif pair > pairs[0]:
            heapq.heapreplace(pairs, pair)
        return kept

    def merge_accumulators(self, accumulators: Any) -> list[Any]:
        accumulators = list(accumulators)
        index = next((kept[0] for kept in accumulators if kept[0] is not None), None)
        pairs = [pair for kept in accumulators for pair in kept[1]]
        top_k = None if index is None else self._options[index][1]
        if top_k is not None:
            pairs = heapq.nlargest(top_k, pairs)
            heapq.heapify(pairs)
        return [index, pairs]

    def extract_output(self, kept: list[Any]) -> list[tuple[int, bytes]]:
        return sorted(kept[1], reverse=True)


def _write(pruned: tuple[int, list[tuple[int, bytes]]], options: list[tuple[str, int | None, int]], temp_dir: str
           ) -> tuple[int, np.ndarray]:
    """(index, the file's path) for one vocabulary, its file written."""
    from apache_beam.io.filesystems import FileSystems

    index, ordered = pruned
    tokens = [token for _, token in ordered] or [_EMPTY_VOCABULARY_TOKEN]
    filename = options[index][0]
    path = FileSystems.join(temp_dir, filename)
    with FileSystems.create(path) as handle:
        handle.write(b"".join(token + b"\n" for token in tokens))
    return index, np.array(path)


def _in_order(written: list[tuple[int, np.ndarray]]) -> list[np.ndarray]:
    return [path for _, path in sorted(written, key=operator.itemgetter(0))]
