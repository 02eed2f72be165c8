"""What the column-wise pipeline (columnar) reads, per format: a file's pieces (Beam's elements), a
piece as batches of columns for csv_columns' kinds and encoder (NotColumnar where it is not read
exactly as the row-wise reader reads it), and the same piece row by row (records), with the bad
records' locations in the whole file.

CSV and JSON lines are cut in byte ranges at line ends (csv_chunks); Parquet in runs of whole row groups
of about ``chunk_bytes`` of data (its own pieces: a row group is read alone, without the others); a
TFRecord file is one piece (example_columns).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Protocol

import pyarrow as pa

from tfxd.components.example_gen import (
    csv_chunks,
    csv_columns,
    example_columns,
    input_files,
    json_columns,
    records,
    typed_columns,
)
from tfxd.components.example_gen.csv_chunks import Piece


class Source(Protocol):
    def pieces(self, item: tuple[int, str, str], chunk_bytes: int, workers: int = 1) -> Iterator[Piece]: ...

    def batches(self, piece: Piece) -> Generator[pa.RecordBatch, None, None]: ...

    def rows(self, piece: Piece) -> Iterator[records.Row | records.Bad]: ...


class Csv:
    """A chunk is the header and the lines that start in its range; a whole file is read as a stream."""

    def pieces(self, item: tuple[int, str, str], chunk_bytes: int, workers: int = 1) -> Iterator[Piece]:
        return csv_chunks.pieces(item, input_files.open_file, chunk_bytes, workers)

    def batches(self, piece: Piece) -> Generator[pa.RecordBatch, None, None]:
        path, opener = piece[1], _chunk_opener(piece, header_line=True)
        if opener is not None:
            yield from csv_columns.batches(path, opener, csv_columns.header(path, opener))

    def rows(self, piece: Piece) -> Iterator[records.Row | records.Bad]:
        _, path, _, _, start, _ = piece
        opener = _chunk_opener(piece, header_line=True)
        if opener is not None:
            yield from records.read_csv(path, opener, csv_chunks.line_offset(path, input_files.open_file, start))


class JsonLines:
    """As CSV's, without a header (and without the scan for quotes: csv_chunks)."""

    def pieces(self, item: tuple[int, str, str], chunk_bytes: int, workers: int = 1) -> Iterator[Piece]:
        index, path, split = item
        for part, (start, end) in enumerate(csv_chunks.ranges(path, input_files.open_file, chunk_bytes, scan=False,
                                                              workers=workers)):
            yield index, path, split, part, start, end

    def batches(self, piece: Piece) -> Generator[pa.RecordBatch, None, None]:
        path, end = piece[1], piece[5]
        opener = _chunk_opener(piece, header_line=False)
        if opener is None:
            return
        rows = 0
        with opener(path) as raw:
            for batch in json_columns.batches(raw, path):
                rows += batch.num_rows
                yield batch
        if rows == 0 and end is None:
            raise csv_columns.NotColumnar(f"{path} has no object")  # the row-wise reader says it is empty

    def rows(self, piece: Piece) -> Iterator[records.Row | records.Bad]:
        _, path, _, _, start, end = piece
        opener = _chunk_opener(piece, header_line=False)
        if opener is None:
            return
        try:
            yield from records.read_jsonl(path, opener, csv_chunks.line_offset(
                path, input_files.open_file, start, header_line=False))
        except records.InputError:
            if end is None:
                raise  # a whole file with nothing in it; a chunk of blank lines is just empty


class Parquet:
    """A piece is a run of row groups [start, end), of about one size (csv_chunks.piece_count of them)."""

    def pieces(self, item: tuple[int, str, str], chunk_bytes: int, workers: int = 1) -> Iterator[Piece]:
        import pyarrow.parquet as pq

        index, path, split = item
        with input_files.open_file(path) as raw:
            metadata = pq.ParquetFile(raw).metadata
        sizes = [metadata.row_group(group).total_byte_size for group in range(metadata.num_row_groups)]
        total = sum(sizes)
        count = min(csv_chunks.piece_count(total, chunk_bytes, workers), max(len(sizes), 1))
        first, size, part = 0, 0, 0
        for group, group_size in enumerate(sizes):
            size += group_size
            if size * count >= total * (part + 1) and part < count - 1:  # past its share of the bytes
                yield index, path, split, part, first, group + 1
                first, part = group + 1, part + 1
        if first < len(sizes) or part == 0:
            yield index, path, split, part, first, len(sizes)

    def batches(self, piece: Piece) -> Generator[pa.RecordBatch, None, None]:
        import pyarrow.parquet as pq

        _, path, _, _, first, end = piece
        rows = 0
        with input_files.open_file(path) as raw:
            parquet = pq.ParquetFile(raw)
            for group in range(first, end or 0):
                batch = typed_columns.plain(parquet.read_row_group(group))
                rows += batch.num_rows
                yield batch
        if rows == 0:
            raise csv_columns.NotColumnar(f"{path}: no rows")  # the row-wise reader names an empty file

    def rows(self, piece: Piece) -> Iterator[records.Row | records.Bad]:
        _, path, _, _, first, end = piece
        return records.read_parquet(path, input_files.open_file, (first, end or 0))


class TfRecords:
    """A piece is a whole file: a TFRecord file has no index to start reading from elsewhere."""

    def pieces(self, item: tuple[int, str, str], chunk_bytes: int, workers: int = 1) -> Iterator[Piece]:
        index, path, split = item
        yield index, path, split, 0, 0, None

    def batches(self, piece: Piece) -> Generator[pa.RecordBatch, None, None]:
        return example_columns.batches(piece[1])

    def rows(self, piece: Piece) -> Iterator[records.Row | records.Bad]:
        return records.read_tfrecord(piece[1], input_files.open_file)


SOURCES: dict[str, Source] = {"csv": Csv(), "jsonl": JsonLines(), "parquet": Parquet(), "tfrecord": TfRecords()}


def column_wise(data_format: str, partitioned: bool) -> bool:
    """Whether ExampleGen reads ``data_format`` column-wise: CSV, JSON lines, Parquet and TFRecords of
    tf.Example, unless a split key partitions the records (TFX's partition by a feature, ``partitioned``)."""
    return data_format in SOURCES and not partitioned


def _chunk_opener(piece: Piece, header_line: bool) -> input_files.Opener | None:
    """The opener of a piece of a text file: the file's for a whole file, else one of the chunk's text;
    None for a chunk with no line on it."""
    _, path, _, _, start, end = piece
    if end is None:
        return input_files.open_file
    chunk_text = csv_chunks.text(path, input_files.open_file, start, end, header_line)
    return None if chunk_text is None else csv_chunks.opener_of(chunk_text)
