"""ExampleGen for CSV, JSON lines, Parquet and TFRecord files, column-wise, on Beam: a piece of a file is
an element.

A large file is cut into pieces (column_sources: byte ranges of CSV and JSON lines, runs of Parquet row
groups; a TFRecord file is one piece) that Beam spreads over its workers. A first pass finds the column
kinds of each piece's first batch (merged into one set for all files, as the row-wise pipeline merges
every row's); the second converts the piece batch by batch (csv_columns' encoder), splits each record by
TFX's own rule (the SHA-256 of its serialized bytes into hash buckets) or by its file's split, and writes
gzipped TFRecords. Nothing goes through Beam per record: the row-wise pipeline spent most of its time
moving rows between Beam stages. A piece the column-wise reader cannot read exactly is read row by row
(records), with bad records named or skipped and counted as before.

The kinds of the rest of a piece are checked as it is written: a batch (or a row) of a kind the first
batches did not show, or of a column they did not have, discards the piece's files and reports the
piece's kinds read whole (WIDER), and the executor runs the pipeline again with every kind known
(``rerun_of``: those pieces alone, or every piece where a kind the first batches showed widened), so
that each column is written as the row-wise reader writes it. So a piece of many batches (a TFRecord
file, a run of Parquet row groups) is read once and a first batch, not twice.
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
WIDER = "wider"
FILE_NAME = "data_tfrecord-{index:05d}-{part:05d}.gz"  # (the file's number, its chunk's)

Kinds = dict[str, str | None]  # column -> its widest kind (records.widest); None: never a value


def piece_kinds(source: column_sources.Source, piece: csv_chunks.Piece, numeric: frozenset[str],
                first_batch: bool = False) -> Kinds:
    """The piece's {column: kind}, of its first batch only where ``first_batch``; read row by row (the
    whole piece) where the column-wise reader hands it back. Bad records are left to the writing pass."""
    found: Kinds = {}
    batches = source.batches(piece)
    try:
        for batch in batches:
            found = records.TypeInferenceState.merge([found, csv_columns.kinds(batch, numeric)])
            if first_batch:
                break
    except csv_columns.NotColumnar:
        found = {}
        for row in source.rows(piece):
            if isinstance(row, records.Row):
                records.TypeInferenceState.add(found, row.values, numeric)
    finally:
        batches.close()  # the reader's file, left at its first batch
    return found


def _widens(seen: Kinds, name: str, kind: str | None) -> bool:
    """Whether ``kind`` of column ``name`` is wider than the kind seen (a column not seen: None)."""
    return records.widest({seen.get(name), kind}) != seen.get(name)


def _covered(seen: Kinds, found: Kinds, pinned: dict[str, str]) -> bool:
    """Whether every column of ``found`` is in ``seen`` and of a kind no wider than seen's; a pinned
    column (data.columns) is written as pinned whatever its kinds."""
    return all(name in pinned or (name in seen and not _widens(seen, name, kind)) for name, kind in found.items())


class _KindsWidened(Exception):
    """A batch or row of a piece is of a kind the first batches did not show."""


class _FileKinds(beam.DoFn):
    """A piece of a file -> the {column: kind} of its first batch."""

    def __init__(self, data_format: str, numeric: list[str]) -> None:
        self._source = column_sources.SOURCES[data_format]
        self._numeric = frozenset(numeric)

    def process(self, piece: csv_chunks.Piece):
        yield piece_kinds(self._source, piece, self._numeric, first_batch=True)


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
    bad_records: skip, the reasons of bad records. Where ``checked`` (the kinds are the first batches'),
    a batch or row of a kind they did not show discards the piece's files and yields the kinds seen
    widened by the piece's own, read whole (WIDER)."""

    def __init__(self, config: ReaderConfig, split_uris: dict[str, str], buckets: list[tuple[str, int]],
                 temp_dir: str, checked: bool = True) -> None:
        self._source = column_sources.SOURCES[config.format]
        self._pinned = config.columns
        self._numeric = frozenset(config.numeric)
        self._label = config.label
        self._skip_bad = config.skips_bad_records
        self._split_uris = split_uris
        self._names = [name for name, _ in buckets]
        self._bounds = [bound for _, bound in buckets]
        self._temp_dir = temp_dir
        self._checked = checked

    def process(self, piece: csv_chunks.Piece, seen: Kinds):
        index, _, split, part = piece[:4]
        types = records.final_types(seen, self._pinned)
        output = _Output(self._temp_dir, index, part)
        bad_reasons: list[str] = []  # handed on once the piece is written: a piece written again counts once
        try:
            try:
                self._column_wise(piece, split, seen, types, output)
            except csv_columns.NotColumnar:
                output.discard()
                output = _Output(self._temp_dir, index, part)
                bad_reasons.extend(self._row_by_row(piece, split, seen, types, output))
        except _KindsWidened:
            output.discard()
            whole = piece_kinds(self._source, piece, self._numeric)
            retyped = any(seen.get(name) is not None and name not in self._pinned and _widens(seen, name, kind)
                          for name, kind in whole.items())
            yield beam.pvalue.TaggedOutput(WIDER, {"piece": [index, part], "retyped": retyped,
                                                   "kinds": records.TypeInferenceState.merge([seen, whole])})
            return
        for bad_reason in bad_reasons:
            yield beam.pvalue.TaggedOutput(BAD, bad_reason)
        yield from output.publish(self._split_uris)

    def _column_wise(self, piece: csv_chunks.Piece, split: str, seen: Kinds, types: dict[str, str],
                     output: _Output) -> None:
        """The first batch was the first pass's; each after it is checked first where ``checked``."""
        for number, batch in enumerate(self._source.batches(piece)):
            if self._checked and number and not _covered(seen, csv_columns.kinds(batch, self._numeric),
                                                         self._pinned):
                raise _KindsWidened
            examples = csv_columns.example_bytes(batch, types, self._label)
            listed = examples.to_pylist()
            splits = [split] * len(listed) if split else [self._split_of(example) for example in listed]
            output.write_all(splits, examples, listed)

    def _row_by_row(self, piece: csv_chunks.Piece, split: str, seen: Kinds, types: dict[str, str],
                    output: _Output):
        for row in self._source.rows(piece):
            if isinstance(row, records.Row):
                if self._checked and not _covered(
                        seen, records.TypeInferenceState.add({}, row.values, self._numeric), self._pinned):
                    raise _KindsWidened
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
             workers: int = 1, rerun: dict | None = None):
    """Write the examples of ``files`` ((path, split) pairs; split "" for hash buckets, given as
    (split, cumulative bucket bound) pairs) into ``split_uris``, reading files larger than
    ``chunk_bytes`` in pieces (column_sources) where that is exact, as many for each of ``workers``
    worker processes where the file is large enough. The kinds are the pieces' first batches', checked as
    the pieces are written, or a ``rerun``'s (what the last run's ``rerun`` said: its kinds and pieces).
    Returns the PCollections of {split: count}, the bad records' reasons, the merged {column: kind} and
    the rerun the kinds ask for ({} for none; ``rerun_of``)."""
    numbered = [(index, path, split) for index, (path, split) in enumerate(files)]
    pieces = (pipeline | "Files" >> beam.Create(numbered)
              | "Chunks" >> beam.FlatMap(column_sources.SOURCES[config.format].pieces, chunk_bytes, workers))
    if rerun and rerun["pieces"] is not None:
        wanted = {tuple(key) for key in rerun["pieces"]}
        pieces = pieces | "Widened" >> beam.Filter(lambda piece: (piece[0], piece[3]) in wanted)
    pieces = pieces | "Spread" >> beam.Reshuffle()  # the pieces of one file to every worker
    if rerun:
        seen = pipeline | "KnownKinds" >> beam.Create([rerun["kinds"]])
    else:
        seen = (pieces | "Kinds" >> beam.ParDo(_FileKinds(config.format, list(config.numeric)))
                | "MergeKinds" >> beam.CombineGlobally(_MergeKinds()))
    written = (pieces
               | "Write" >> beam.ParDo(_WriteFile(config, split_uris, buckets, temp_dir, checked=not rerun),
                                       seen=beam.pvalue.AsSingleton(seen)).with_outputs(BAD, WIDER, main="counts"))
    counts = (written.counts | "SumCounts" >> beam.CombinePerKey(sum)
              | "CountsToDict" >> beam.combiners.ToDict())
    return counts, written[BAD], seen, (written[WIDER] | "WidenedPieces" >> beam.combiners.ToList()
                                        | "Rerun" >> beam.Map(rerun_of))


def rerun_of(widened: list[dict]) -> dict:
    """The run again that widened pieces ask for: the kinds of the whole data (the first batches' widened
    by each such piece's), and the pieces to write: those alone where only columns the first batches held
    no value of widened (no other piece wrote a value of them, so the others' files stand), else every
    piece (None: a piece may have written a value with the narrower kind). {} for none."""
    if not widened:
        return {}
    retyped = any(found["retyped"] for found in widened)
    return {"kinds": records.TypeInferenceState.merge([found["kinds"] for found in widened]),
            "pieces": None if retyped else sorted(found["piece"] for found in widened)}
