"""A large CSV file read in chunks gives what it gives read whole: every line once, the same examples,
bad records named by their line in the file; a file where a newline may not end a record is read whole."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.components.example_gen.conftest import EXTERNAL, example_gen_outputs
from tfxd.components.example_gen import csv_chunks, input_files, records

HEADER = "fare,tips,company\n"


def _lines(count: int) -> str:
    """Rows of varying length, blank lines among them."""
    return "".join(("\n" if i % 17 == 5 else "") + f"{i * 1.5},{i % 7},{'c' * (i % 23)}\n" for i in range(count))


def _rows(path: str, opener, offset: int = 0) -> list[tuple[str, dict]]:
    return [(row.location, row.values) for row in records.read_csv(path, opener, offset)]


@pytest.mark.parametrize("chunk_bytes", [1, 7, 64, 333, 4000])
def test_every_line_is_read_once_and_named_by_its_line_in_the_file(tmp_path, chunk_bytes):
    path = tmp_path / "d.csv"
    path.write_text(HEADER + _lines(300))
    whole = _rows(str(path), input_files.open_file)
    ranges = csv_chunks.ranges(str(path), input_files.open_file, chunk_bytes)
    assert len(ranges) == -(-path.stat().st_size // chunk_bytes)
    read = []
    for start, end in ranges:
        chunk_text = csv_chunks.text(str(path), input_files.open_file, start, end)
        if chunk_text is None:
            continue
        assert chunk_text[0] == HEADER.encode()
        offset = csv_chunks.line_offset(str(path), input_files.open_file, start)
        read += _rows(str(path), csv_chunks.opener_of(chunk_text), offset)
    assert read == whole
    assert whole[-1][0] == f"{path}:{HEADER.count(chr(10)) + _lines(300).count(chr(10))}"


@pytest.mark.parametrize(("name", "content"), [
    ("quoted.csv", HEADER + _lines(300) + '1.0,2,"a, b"\n'),
    ("crlf.csv", (HEADER + _lines(300)).replace("\n", "\r\n")),
    ("small.csv", HEADER + "1.0,2,c\n"),
])
def test_a_file_where_a_newline_may_not_end_a_record_is_read_whole(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    assert csv_chunks.ranges(str(path), input_files.open_file, 64 if name != "small.csv" else 4096) == [csv_chunks.WHOLE]


def test_a_compressed_file_is_read_whole(tmp_path):
    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress((HEADER + _lines(300)).encode()))
    assert csv_chunks.ranges(str(path), input_files.open_file, 64) == [csv_chunks.WHOLE]


def test_a_chunked_file_gives_the_examples_it_gives_read_whole(run_example_gen, monkeypatch, tmp_path):
    data = {"format": "csv", "path": str(EXTERNAL / "csv" / "data.csv"), "splits": {"train": 0.75, "eval": 0.25}}
    whole, _ = run_example_gen(data)
    monkeypatch.setattr(csv_chunks, "CHUNK_BYTES", 100_000)  # 14 chunks of the 1.3 MB file
    chunked, artifact = run_example_gen(data)
    assert chunked == whole
    assert sum(len(examples) for examples in whole.values()) == 10_000
    for split in ("train", "eval"):
        assert len(list(tmp_path.glob(f"out-1/examples/Split-{split}/*.gz"))) == 14


@pytest.mark.reliability("bad data")
def test_a_bad_record_in_a_chunk_is_named_by_its_line_in_the_file(run_example_gen, monkeypatch, tmp_path):
    lines = [f"{i}.5,{i % 3},c{i}\n" for i in range(3000)]
    lines[2500] = "2500.5,1\n"  # ragged: file line 2502 (the header is line 1)
    (tmp_path / "d.csv").write_text(HEADER + "".join(lines))
    monkeypatch.setattr(csv_chunks, "CHUNK_BYTES", 4096)
    data = {"format": "csv", "path": "d.csv", "splits": {"train": 0.8, "eval": 0.2}}
    with pytest.raises(Exception, match=r"d\.csv:2502: ragged row: 2 fields where the header has 3"):
        run_example_gen(data)
    splits, artifact = run_example_gen({**data, "bad_records": "skip"})
    assert sum(len(examples) for examples in splits.values()) == 2999
    assert json.loads(artifact.get_string_custom_property("tfxd_bad_records")) == {"ragged row": 1}


@pytest.mark.parametrize(("size", "workers", "count"), [
    (23 << 20, 1, 2),  # above a chunk: two pieces of one size (not 16 MB and 7)
    (23 << 20, 2, 2),
    (58 << 20, 2, 4),
    (40 << 20, 2, 4),  # three would leave one worker two of them
    (40 << 20, 3, 3),
    (10 << 20, 2, 2),  # below a chunk, cut for the workers
    (7 << 20, 2, 1),  # too small to cut: pieces under MIN_PIECE_BYTES cost more than they bring
    (9 << 20, 4, 2),  # four would be too small: as many as the size allows
    (1 << 10, 1, 1),
])
def test_a_file_is_cut_into_pieces_of_one_size_as_many_for_each_worker(size, workers, count):
    assert csv_chunks.piece_count(size, csv_chunks.CHUNK_BYTES, workers) == count


def test_pieces_for_workers_are_of_one_size_and_read_every_line_once(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text(HEADER + _lines(300))
    size = path.stat().st_size
    ranges = csv_chunks.ranges(str(path), input_files.open_file, size, workers=4)
    assert ranges == [csv_chunks.WHOLE]  # a few kB: not worth cutting
    original = csv_chunks.MIN_PIECE_BYTES
    try:
        csv_chunks.MIN_PIECE_BYTES = 1000
        ranges = csv_chunks.ranges(str(path), input_files.open_file, size, workers=4)
    finally:
        csv_chunks.MIN_PIECE_BYTES = original
    assert len(ranges) == 4 and len({end - start for start, end in ranges[:-1]}) == 1
    assert ranges[-1][1] == size and ranges[-1][1] - ranges[-1][0] <= ranges[0][1] - ranges[0][0]
    read = []
    for start, end in ranges:
        chunk_text = csv_chunks.text(str(path), input_files.open_file, start, end)
        read += _rows(str(path), csv_chunks.opener_of(chunk_text), 0) if chunk_text else []
    assert [values for _, values in read] == [values for _, values in _rows(str(path), input_files.open_file)]


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory):
    """A 9 MB CSV (under one chunk), its data section, and what one process writes of it (both modes of the
    next test compare with it)."""
    folder = tmp_path_factory.mktemp("big")
    rows = "".join(f"{i * 0.25},{i % 9},company {i % 101} {'x' * (i % 40)}\n" for i in range(220_000))
    (folder / "big.csv").write_text(HEADER + rows)
    assert 8 << 20 < (folder / "big.csv").stat().st_size < csv_chunks.CHUNK_BYTES
    data = {"format": "csv", "path": str(folder / "big.csv"), "splits": {"train": 0.75, "eval": 0.25}}
    return data, example_gen_outputs(folder, data)[0]


@pytest.mark.parametrize("threads", [False, True], ids=["processes", "threads"])
def test_two_workers_get_a_file_each_of_one_size_with_the_same_examples(big_csv, run_example_gen, threads):
    """Two workers, a 9 MB CSV (under one chunk): two files per split, about as large, holding what one
    process writes in one file per split (the next components read a file per worker); worker processes, or
    threads as a run gives them to the column-wise ExampleGen (beam_args.example_gen_args)."""
    from tfxd.direct_runner import direct_args
    from tfxd.pipeline.assembly.beam_args import THREADS

    data, one = big_csv
    two, artifact = run_example_gen(data, [*direct_args("multi_processing", 2), *([THREADS] if threads else [])])
    assert two == one and sum(map(len, one.values())) == 220_000
    for split in ("train", "eval"):
        sizes = [path.stat().st_size for path in (Path(artifact.uri) / f"Split-{split}").glob("*.gz")]
        assert len(sizes) == 2 and min(sizes) > 0.9 * max(sizes), sizes
