"""A large CSV file read in chunks gives what it gives read whole: every line once, the same examples,
bad records named by their line in the file; a file where a newline may not end a record is read whole."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.components.example_gen.conftest import EXTERNAL
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
