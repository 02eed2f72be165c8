"""A large CSV file as byte ranges that Beam spreads over its workers (a chunk of a file is an element).

A chunk owns the lines that start inside its range: it skips the end of the line it starts in (the
chunk before finishes that one) and reads past its own end to finish its last line, so every line is
read exactly once, whatever the chunk size. That is exact only where every newline ends a record: a
file with a quote character (a quoted field may hold a newline), a carriage return (a line ending
other than "\\n"), or a compressed file (no seeking) is one chunk, read whole as before. JSON lines are
cut the same way, with no header and no scan: a JSON text holds no raw newline, so every newline ends a
line the row-wise reader reads alone.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from tfxd.components.example_gen.input_files import Opener, compressed

CHUNK_BYTES = 16 << 20  # the same as an Arrow batch: one chunk is one batch in memory at a time
MIN_PIECE_BYTES = 4 << 20  # below this a file is not cut for the workers' sake: their start-up costs more
_SCAN_BYTES = 8 << 20
WHOLE = (0, None)  # (start, end) of a file read whole
Piece = tuple[int, str, str, int, int, "int | None"]  # (index, path, split, part, start, end): an element


def piece_count(size: int, chunk_bytes: int, workers: int) -> int:
    """How many pieces of one size a file of ``size`` bytes is cut into: none larger than ``chunk_bytes``,
    and, with several worker processes, as many for each of them (the count a multiple of ``workers``)
    where that leaves pieces of at least MIN_PIECE_BYTES, else as many as that allows. Each piece is a file of each split, which is
    what the next components' readers spread over the workers, a file to a worker: a 23 MB CSV cut
    16 + 7 MB left one worker of two with 70% of the rows in every component after (bench/RESULTS.md)."""
    count = max(1, -(-size // chunk_bytes))
    if workers > 1:
        balanced = -(-count // workers) * workers
        count = max(count, min(balanced, size // MIN_PIECE_BYTES))
    return count


def ranges(path: str, opener: Opener, chunk_bytes: int, scan: bool = True, workers: int = 1
           ) -> list[tuple[int, int | None]]:
    """The (start, end) byte ranges ``path`` is read in, of one size (piece_count of them): ``[WHOLE]``
    unless it is uncompressed, is cut into more than one and (``scan``: CSV) is free of quotes and
    carriage returns (one quick pass over the bytes)."""
    from apache_beam.io.filesystems import FileSystems

    if compressed(path):
        return [WHOLE]
    size = FileSystems.match([path])[0].metadata_list[0].size_in_bytes
    count = piece_count(size, chunk_bytes, workers)
    if count == 1:
        return [WHOLE]
    with opener(path) as raw:
        while scan and (block := raw.read(_SCAN_BYTES)):
            if b'"' in block or b"\r" in block:
                return [WHOLE]
    step = -(-size // count)
    return [(start, min(start + step, size)) for start in range(0, size, step)]


def text(path: str, opener: Opener, start: int, end: int, header_line: bool = True) -> tuple[bytes, bytes] | None:
    """The header line (b"" without ``header_line``: JSON lines) and the lines that start in [start, end);
    None when no line with anything on it starts there."""
    with opener(path) as raw:
        header = raw.readline() if header_line else b""
        if start > 0:
            raw.seek(start - 1)
            raw.readline()  # the rest of the line the byte before ``start`` is in (just "\n" at a line start)
        body_start = raw.tell()
        body = raw.read(end - body_start) if body_start < end else b""
        if body and not body.endswith(b"\n"):
            body += raw.readline()
    if not body.strip(b"\n"):
        return None
    return header if header.endswith(b"\n") or not header_line else header + b"\n", body


def opener_of(chunk_text: tuple[bytes, bytes]) -> Opener:
    """An opener that reads ``chunk_text`` for any path."""
    joined = b"".join(chunk_text)
    return lambda _path: io.BytesIO(joined)


def line_offset(path: str, opener: Opener, start: int, header_line: bool = True) -> int:
    """What to add to a line number in the chunk's text (its header, if ``header_line``, is line 1) to get
    the line number in the file: counted only when a chunk is read row by row, to name a bad record's line."""
    if start == 0:
        return 0
    newlines, remaining = 0, start
    with opener(path) as raw:
        while remaining > 0 and (block := raw.read(min(_SCAN_BYTES, remaining))):
            newlines += block.count(b"\n")
            remaining -= len(block)
        raw.seek(start - 1)
        if raw.read(1) != b"\n":
            newlines += 1  # the chunk's first line is the one after the line ``start`` falls in
    return newlines - 1 if header_line else newlines  # the chunk text's first line after its header is line 2


def pieces(item: tuple[int, str, str], opener: Opener, chunk_bytes: int, workers: int = 1) -> Iterator[Piece]:
    """(index, path, split) -> (index, path, split, part, start, end) for each of the file's ranges."""
    index, path, split = item
    for part, (start, end) in enumerate(ranges(path, opener, chunk_bytes, workers=workers)):
        yield index, path, split, part, start, end
