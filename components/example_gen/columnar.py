"""ExampleGen for CSV, JSON lines and Parquet files, column-wise, on Beam: a piece of a file is an
element, read twice.

A large file is cut into pieces (column_sources: byte ranges of CSV and JSON lines, runs of Parquet row
groups) that Beam spreads over its workers. The first pass finds each piece's column kinds (merged into
one set for all files, as the row-wise pipeline does); the second converts the piece batch by batch
(csv_columns' encoder), splits each record by TFX's own rule (the SHA-256 of its serialized bytes into
hash buckets) or by its file's split, and writes gzipped TFRecords. Nothing goes through Beam per record: the row-wise pipeline spent most of its time
moving rows between Beam stages. A piece the column-wise reader cannot read exactly is read row by row
(records), with bad records named or skipped and counted as before.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from collections import Counter

import apache_beam as beam
import numpy as np
import pyarrow as pa

from tfxd import tfrecords
from tfxd.components.example_gen import column_sources, csv_chunks, csv_columns, records
from tfxd.reader_config import ReaderConfig

BAD = "bad"
FILE_NAME = "data_tfrecord-{index:05d}-{part:05d}.gz"  # (the file's number, its chunk's)


class _FileKinds(beam.DoFn):
    """A piece of a file -> its {column: kind} (bad records are left to the second pass)."""

    def __init__(self, data_format: str, numeric: list[str]) -> None:
        self._source = column_sources.SOURCES[data_format]
        self._numeric = frozenset(numeric)

    def process(self, piece: csv_chunks.Piece):
        found: dict[str, str | None] = {}
        try:
            for batch in self._source.batches(piece):
                found = records.TypeInferenceState.merge([found, csv_columns.kinds(batch, self._numeric)])
        except csv_columns.NotColumnar:
            found = {}
            for row in self._source.rows(piece):
                if isinstance(row, records.Row):
                    records.TypeInferenceState.add(found, row.values, self._numeric)
        yield found


class _MergeKinds(beam.CombineFn):
    def create_accumulator(self) -> dict[str, str | None]:
        return {}

    def add_input(self, state: dict[str, str | None], found: dict[str, str | None]) -> dict[str, str | None]:
        return records.TypeInferenceState.merge([state, found])

    def merge_accumulators(self, states) -> dict[str, str | None]:
        return records.TypeInferenceState.merge(list(states))

    def extract_output(self, state: dict[str, str | None]) -> dict[str, str | None]:
        return state


class _WriteFile(beam.DoFn):
    """A piece of a file -> gzipped TFRecords of its examples per split, written under a temporary
    name and moved into the split's folder when the file is done; yields (split, count) pairs and, under
    bad_records: skip, the reasons of bad records."""

    def __init__(self, config: ReaderConfig, split_uris: dict[str, str], buckets: list[tuple[str, int]],
                 temp_dir: str) -> None:
        self._source = column_sources.SOURCES[config.format]
        self._pinned = config.columns
        self._label = config.label
        self._skip_bad = config.skips_bad_records
        self._split_uris = split_uris
        self._names = [name for name, _ in buckets]
        self._bounds = [bound for _, bound in buckets]
        self._temp_dir = temp_dir

    def process(self, piece: csv_chunks.Piece, seen: dict[str, str | None]):
        index, _, split, part = piece[:4]
        types = records.final_types(seen, self._pinned)
        output = _Output(self._temp_dir, index, part)
        try:
            for batch in self._source.batches(piece):
                examples = csv_columns.example_bytes(batch, types, self._label)
                listed = examples.to_pylist()
                splits = [split] * len(listed) if split else [self._split_of(example) for example in listed]
                output.write_all(splits, examples, listed)
        except csv_columns.NotColumnar:
            output.discard()
            output = _Output(self._temp_dir, index, part)
            for bad_reason in self._row_by_row(piece, split, types, output):
                yield beam.pvalue.TaggedOutput(BAD, bad_reason)
        yield from output.publish(self._split_uris)

    def _row_by_row(self, piece: csv_chunks.Piece, split: str, types: dict[str, str], output: _Output):
        for row in self._source.rows(piece):
            if isinstance(row, records.Row):
                features, problem = records.encode(row.values, types)
                if not problem and self._label:
                    wrong = records.label_problem(features, types, self._label)
                    problem = (records.UNEXPECTED_LABEL, wrong) if wrong else None
                if not problem:
                    example = records.example_bytes(features, types)
                    output.write(split or self._split_of(example), example)
                    continue
                row = records.Bad(row.location, *problem)
            if not self._skip_bad:
                raise row.error()
            yield row.reason

    def _split_of(self, example: bytes) -> str:
        """TFX's partition of a record by hash buckets (base_example_gen_executor._PartitionFn)."""
        bucket = int.from_bytes(hashlib.sha256(example).digest(), "big") % self._bounds[-1]
        return self._names[bisect.bisect(self._bounds, bucket)]


class _Output:
    """One gzipped TFRecord file per split for one piece of an input file, under a temporary name until published.
    Written with Beam's filesystems and tfxd.tfrecords' framing: a Beam worker never imports TensorFlow
    (seconds per worker process) to read its files."""

    def __init__(self, temp_dir: str, index: int, part: int) -> None:
        self._temp_dir = temp_dir
        self._name = FILE_NAME.format(index=index, part=part)
        self._files: dict[str, tfrecords.GzipWriter] = {}
        self._pending: dict[str, bytearray] = {}
        self.counts: Counter[str] = Counter()

    def _temp(self, split: str) -> str:
        return os.path.join(self._temp_dir, f"{split}-{self._name}")

    def write(self, split: str, example: bytes) -> None:
        pending = self._pending.setdefault(split, bytearray())
        pending += tfrecords.framed(example)
        self.counts[split] += 1
        if len(pending) >= _FLUSH_BYTES:
            self._flush(split)

    def write_all(self, splits: list[str], examples: pa.Array, listed: list[bytes]) -> None:
        """``examples`` (``listed`` as Python bytes) framed column-wise, each into its split."""
        framed = tfrecords.framed_all(examples, listed)
        chosen = np.array(splits)
        for split in dict.fromkeys(splits):
            part = framed.filter(pa.array(chosen == split))
            pending = self._pending.setdefault(split, bytearray())
            pending += tfrecords.joined(part)
            self.counts[split] += len(part)
            if len(pending) >= _FLUSH_BYTES:
                self._flush(split)

    def _flush(self, split: str) -> None:
        from apache_beam.io.filesystem import CompressionTypes
        from apache_beam.io.filesystems import FileSystems

        if split not in self._files:  # gzipped here, not by Beam (tfrecords: its level)
            stream = FileSystems.create(self._temp(split), compression_type=CompressionTypes.UNCOMPRESSED)
            self._files[split] = tfrecords.GzipWriter(stream)
        self._files[split].write(self._pending.pop(split, b""))

    def _close(self) -> None:
        for split in list(self._pending):
            self._flush(split)
        for writer in self._files.values():
            writer.close()

    def discard(self) -> None:
        from apache_beam.io.filesystems import FileSystems

        self._close()
        FileSystems.delete([self._temp(split) for split in self._files])

    def publish(self, split_uris: dict[str, str]):
        from apache_beam.io.filesystems import FileSystems

        self._close()
        splits = list(self._files)
        finals = [os.path.join(split_uris[split], self._name) for split in splits]
        FileSystems.delete([final for final in finals if FileSystems.exists(final)])  # a retried bundle's
        FileSystems.rename([self._temp(split) for split in splits], finals)
        yield from self.counts.items()


_FLUSH_BYTES = 4 << 20


def examples(pipeline: beam.Pipeline, config: ReaderConfig, files: list[tuple[str, str]],
             split_uris: dict[str, str], buckets: list[tuple[str, int]], temp_dir: str, chunk_bytes: int,
             workers: int = 1):
    """Write the examples of ``files`` ((path, split) pairs; split "" for hash buckets, given as
    (split, cumulative bucket bound) pairs) into ``split_uris``, reading files larger than
    ``chunk_bytes`` in pieces (column_sources) where that is exact, as many for each of ``workers``
    worker processes where the file is large enough. Returns the PCollections of
    {split: count}, the bad records' reasons and the merged {column: kind}."""
    numbered = [(index, path, split) for index, (path, split) in enumerate(files)]
    pieces = (pipeline | "Files" >> beam.Create(numbered)
              | "Chunks" >> beam.FlatMap(column_sources.SOURCES[config.format].pieces, chunk_bytes, workers)
              | "Spread" >> beam.Reshuffle())  # the pieces of one file to every worker
    seen = (pieces | "Kinds" >> beam.ParDo(_FileKinds(config.format, list(config.numeric)))
            | "MergeKinds" >> beam.CombineGlobally(_MergeKinds()))
    written = (pieces
               | "Write" >> beam.ParDo(_WriteFile(config, split_uris, buckets, temp_dir),
                                       seen=beam.pvalue.AsSingleton(seen)).with_outputs(BAD, main="counts"))
    counts = (written.counts | "SumCounts" >> beam.CombinePerKey(sum)
              | "CountsToDict" >> beam.combiners.ToDict())
    return counts, written[BAD], seen
