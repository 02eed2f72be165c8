"""ExampleGen for CSV, JSON lines, Parquet and TFRecord files, column-wise, on Beam: a piece of a file is
an element.

A large file is cut into pieces (column_sources: byte ranges of CSV and JSON lines, runs of Parquet row
groups; a TFRecord file is one piece) that Beam spreads over its workers. Each piece is read once: its
batches are typed by the kinds they show (csv_columns' kinds and encoder), each record split by TFX's own
rule (the SHA-256 of its serialized bytes into hash buckets) or by its file's split, and written as gzipped
TFRecords under temporary names. Nothing goes through Beam per record: the row-wise pipeline spent most of
its time moving rows between Beam stages. A piece the column-wise reader cannot read exactly is read row by
row (records), with bad records named or skipped and counted as before.

What a piece wrote (``Written``: its kinds, the columns it wrote a value of, its files and counts) goes to
the executor, which merges every piece's kinds into the data's (as the row-wise pipeline merges every
row's) and publishes each piece whose columns with a value were written as those kinds write them
(``settle``): a column a piece held no value of is absent from its records whatever its kind. A piece
whose columns the rest of the data widened (ints where another piece has floats) is written again with the
data's kinds (``rerun``); within a piece, a column is typed when its first value comes, and a batch that
widens a column already written discards the piece's files and writes it again with its kinds read whole.
So each column is written as the row-wise reader writes it, and the common case reads every piece once.
"""

from __future__ import annotations

import bisect
import hashlib
import os
from collections import Counter
from typing import TypedDict

import apache_beam as beam
import numpy as np
import pyarrow as pa

from tfxd import tfrecords
from tfxd.components.example_gen import column_sources, csv_chunks, csv_columns, records
from tfxd.reader_config import ReaderConfig

FILE_NAME = "data_tfrecord-{index:05d}-{part:05d}.gz"  # (the file's number, its chunk's)

Kinds = dict[str, str | None]  # column -> its widest kind (records.widest); None: never a value


class Written(TypedDict):
    """What one piece wrote, for the executor to publish or write again (a JSON object)."""

    piece: list[int]  # [the file's number, the piece's part]
    kinds: Kinds  # of the piece's records, as its files were typed
    filled: list[str]  # the columns of which it wrote a value (an empty list is a value)
    files: dict[str, str]  # split -> its temporary file
    counts: dict[str, int]  # split -> records
    bad: dict[str, int]  # a bad record's reason -> records, under bad_records: skip


class Rerun(TypedDict):
    """A run of the pipeline again: the data's kinds, and the pieces to write with them."""

    kinds: Kinds
    pieces: list[list[int]]


def piece_kinds(source: column_sources.Source, piece: csv_chunks.Piece, numeric: frozenset[str]) -> Kinds:
    """The {column: kind} of a whole piece; read row by row where the column-wise reader hands it back.
    Bad records are left to the writing pass."""
    found: Kinds = {}
    try:
        for batch in source.batches(piece):
            found = records.TypeInferenceState.merge([found, csv_columns.kinds(batch, numeric)])
    except csv_columns.NotColumnar:
        found = _row_kinds(source, piece, numeric)
    return found


def _row_kinds(source: column_sources.Source, piece: csv_chunks.Piece, numeric: frozenset[str]) -> Kinds:
    found: Kinds = {}
    for row in source.rows(piece):
        if isinstance(row, records.Row):
            records.TypeInferenceState.add(found, row.values, numeric)
    return found


def _widens(seen: Kinds, name: str, kind: str | None) -> bool:
    """Whether ``kind`` of column ``name`` is wider than the kind seen (a column not seen: None)."""
    return records.widest({seen.get(name), kind}) != seen.get(name)


def settle(written: list[Written], kinds: Kinds, pinned: dict[str, str]) -> tuple[list[Written], list[Written]]:
    """(the pieces that stand, those to write again) with the data's ``kinds``: a piece stands where each
    column it wrote a value of has the type the data's kinds give it (a pinned column is written as pinned
    whatever its kinds)."""
    types = records.final_types(kinds, pinned)
    stand: list[Written] = []
    again: list[Written] = []
    for piece in written:
        own = records.final_types(piece["kinds"], pinned)
        (stand if all(own[name] == types[name] for name in piece["filled"]) else again).append(piece)
    return stand, again


def merged_kinds(written: list[Written]) -> Kinds:
    return records.TypeInferenceState.merge([piece["kinds"] for piece in written])


def publish(written: list[Written], split_uris: dict[str, str]) -> None:
    """The pieces' files moved into their splits' folders. None is there yet: the executor empties its
    outputs before it writes (a retry in place) and publishes each piece once."""
    from apache_beam.io.filesystems import FileSystems

    temps, finals = [], []
    for piece in written:
        name = FILE_NAME.format(index=piece["piece"][0], part=piece["piece"][1])
        for split, temp in piece["files"].items():
            temps.append(temp)
            finals.append(os.path.join(split_uris[split], name))
    if temps:
        FileSystems.rename(temps, finals)


def discard(written: list[Written]) -> None:
    from apache_beam.io.filesystems import FileSystems

    temps = [temp for piece in written for temp in piece["files"].values()]
    if temps:
        FileSystems.delete(temps)


class _KindsWidened(Exception):
    """A batch of a piece widens a column the piece has already written a value of."""


class _PieceKinds:
    """The kinds of a piece as its batches come, and the columns it has written a value of. A column is
    typed by its first value (a column with none is absent from every record so far, whatever its kind);
    a batch that widens a column with values raises _KindsWidened, unless its kinds are ``fixed`` (given
    whole)."""

    def __init__(self, numeric: frozenset[str], pinned: dict[str, str], fixed: Kinds | None = None) -> None:
        self._numeric, self._pinned, self._fixed = numeric, pinned, fixed is not None
        self.kinds: Kinds = dict(fixed or {})
        self.filled: set[str] = set()
        self.types = records.final_types(self.kinds, pinned)

    def add_batch(self, batch: pa.RecordBatch) -> None:
        filled = {name for name, column in zip(batch.schema.names, batch.columns, strict=True)
                  if column.null_count < len(column)}
        if not self._fixed:
            self._add(csv_columns.kinds(batch, self._numeric))
        self.filled |= filled

    def add_row(self, values: dict) -> None:
        """A row of a piece whose kinds are fixed (read whole row by row first)."""
        self.filled.update(name for name, value in values.items() if value is not None)

    def _add(self, found: Kinds) -> None:
        if all(name in self.kinds and not _widens(self.kinds, name, kind) for name, kind in found.items()):
            return
        if any(name in self.filled and name not in self._pinned and _widens(self.kinds, name, kind)
               for name, kind in found.items()):
            raise _KindsWidened
        self.kinds = records.TypeInferenceState.merge([self.kinds, found])
        self.types = records.final_types(self.kinds, self._pinned)


class _WriteFile(beam.DoFn):
    """A piece of a file -> gzipped TFRecords of its examples per split, under temporary names, and what it
    wrote (Written). With ``known`` kinds (a run again) the piece is typed by them alone."""

    def __init__(self, config: ReaderConfig, buckets: list[tuple[str, int]], temp_dir: str,
                 known: Kinds | None = None) -> None:
        self._source = column_sources.SOURCES[config.format]
        self._pinned = config.columns
        self._numeric = frozenset(config.numeric)
        self._label = config.label
        self._skip_bad = config.skips_bad_records
        self._names = [name for name, _ in buckets]
        self._bounds = [bound for _, bound in buckets]
        self._temp_dir = temp_dir
        self._known = known

    def process(self, piece: csv_chunks.Piece):
        try:
            yield self._write(piece, self._known)
        except _KindsWidened:  # typed by its first batches, a later one widened a column with values
            yield self._write(piece, piece_kinds(self._source, piece, self._numeric))

    def _write(self, piece: csv_chunks.Piece, kinds: Kinds | None) -> Written:
        index, _, split, part = piece[:4]
        output = _Output(self._temp_dir, index, part)
        state = _PieceKinds(self._numeric, self._pinned, kinds)
        bad: Counter[str] = Counter()
        try:
            try:
                self._column_wise(piece, split, state, output)
            except csv_columns.NotColumnar:
                output.discard()
                output = _Output(self._temp_dir, index, part)
                state = _PieceKinds(self._numeric, self._pinned,
                                    kinds if kinds is not None else _row_kinds(self._source, piece, self._numeric))
                bad.update(self._row_by_row(piece, split, state, output))
        except BaseException:
            output.discard()
            raise
        return Written(piece=[index, part], kinds=state.kinds, filled=sorted(state.filled), files=output.close(),
                       counts=dict(output.counts), bad=dict(bad))

    def _column_wise(self, piece: csv_chunks.Piece, split: str, state: _PieceKinds, output: _Output) -> None:
        for batch in self._source.batches(piece):
            state.add_batch(batch)
            examples = csv_columns.example_bytes(batch, state.types, self._label)
            listed = examples.to_pylist()
            splits = [split] * len(listed) if split else [self._split_of(example) for example in listed]
            output.write_all(splits, examples, listed)

    def _row_by_row(self, piece: csv_chunks.Piece, split: str, state: _PieceKinds, output: _Output):
        """The piece's bad records' reasons, under bad_records: skip."""
        types = state.types
        for row in self._source.rows(piece):
            if isinstance(row, records.Row):
                features, problem = records.encode(row.values, types)
                if not problem and self._label:
                    wrong = records.label_problem(features, types, self._label)
                    problem = (records.UNEXPECTED_LABEL, wrong) if wrong else None
                if not problem:
                    state.add_row(row.values)
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
    """One gzipped TFRecord file per split for one piece of an input file, under a temporary name until
    published. Written with Beam's filesystems and tfxd.tfrecords' framing: a Beam worker never imports
    TensorFlow (seconds per worker process) to read its files."""

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

    def close(self) -> dict[str, str]:
        """{split: temporary file}, each written whole."""
        for split in list(self._pending):
            self._flush(split)
        for writer in self._files.values():
            writer.close()
        return {split: self._temp(split) for split in self._files}

    def discard(self) -> None:
        from apache_beam.io.filesystems import FileSystems

        self._pending.clear()
        FileSystems.delete(list(self.close().values()))


_FLUSH_BYTES = 4 << 20


def examples(pipeline: beam.Pipeline, config: ReaderConfig, files: list[tuple[str, str]],
             buckets: list[tuple[str, int]], temp_dir: str, chunk_bytes: int, workers: int = 1,
             rerun: Rerun | None = None):
    """Write the examples of ``files`` ((path, split) pairs; split "" for hash buckets, given as (split,
    cumulative bucket bound) pairs) under ``temp_dir``, reading files larger than ``chunk_bytes`` in pieces
    (column_sources) where that is exact, as many for each of ``workers`` worker processes where the file is
    large enough; with a ``rerun``, its pieces alone, typed by its kinds. Returns the PCollection of one list
    of every piece's Written, for the executor to ``settle`` and ``publish``."""
    numbered = [(index, path, split) for index, (path, split) in enumerate(files)]
    pieces = (pipeline | "Files" >> beam.Create(numbered)
              | "Chunks" >> beam.FlatMap(column_sources.SOURCES[config.format].pieces, chunk_bytes, workers))
    if rerun:
        wanted = {tuple(key) for key in rerun["pieces"]}
        pieces = pieces | "Again" >> beam.Filter(lambda piece: (piece[0], piece[3]) in wanted)
    return (pieces | "Spread" >> beam.Reshuffle()  # the pieces of one file to every worker
            | "Write" >> beam.ParDo(_WriteFile(config, buckets, temp_dir, rerun["kinds"] if rerun else None))
            | "AllWritten" >> beam.combiners.ToList())
