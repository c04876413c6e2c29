"""Read units: a big file split into byte ranges or row-group runs reads back exactly the
documents, ids included, of reading it whole; small files are packed; streams are never split."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmforge.pipeline.sources.files import read_source
from lmforge.pipeline.sources.read_plan import (
    count_line_starts,
    number_lines,
    plan_reads,
    ranges_to_count,
    read_documents,
)


def jsonl_lines(n: int, seed: int = 0) -> list[bytes]:
    """Records of varied length (some with their own id), blank lines between some."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        record = {"text": " ".join(f"w{rng.randrange(1000)}" for _ in range(rng.randrange(1, 40)))}
        if i % 7 == 3:
            record["id"] = f"own-{i}"
        lines.append(json.dumps(record).encode() + b"\n")
        if i % 5 == 0:
            lines.append(b"\n")
    return lines


def read_planned(paths: list[str], split_bytes: int) -> tuple[list, list]:
    """(units, documents) as `clean` reads them: plan, count line starts, read every piece."""
    units = plan_reads(paths, split_bytes)
    ranges = ranges_to_count(units)
    counts = {(p.path, p.start): count_line_starts(p.path, p.start, p.end) for p in ranges}
    units = number_lines(units, counts)
    docs = [
        (d.id, d.text, d.meta)
        for u in units
        for p in u.pieces
        for d in read_documents(p, "text", 64.0)
    ]
    return units, docs


def whole(paths: list[str]) -> list:
    return [(d.id, d.text, d.meta) for p in paths for d in read_source(p)]


@pytest.mark.parametrize("trailing_newline", [True, False])
def test_a_jsonl_file_split_at_any_size_reads_back_every_document_once_with_its_id(
    tmp_path, trailing_newline
):
    path = tmp_path / "big.jsonl"
    data = b"".join(jsonl_lines(60))
    path.write_bytes(data if trailing_newline else data.rstrip(b"\n"))
    expected = whole([str(path)])
    assert len(expected) == 60
    # Every split size from 1 byte up: range boundaries fall inside lines, on newlines, on
    # blank lines and at the start of a line.
    for split in [*range(1, 130), 1000, len(data) - 1]:
        units, docs = read_planned([str(path)], split)
        assert docs == expected, split
        assert len(units) == -(-len(data.rstrip(b"\n") if not trailing_newline else data) // split)


def test_line_starts_of_the_ranges_add_up_to_the_lines_of_the_file(tmp_path):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"a\n\nbb\nccc\n")
    assert [count_line_starts(str(path), s, min(s + 3, 10)) for s in range(0, 10, 3)] == [
        2,  # "a\n", "\n"
        1,  # "bb\n"
        1,  # "ccc\n"
        0,
    ]
    assert count_line_starts(str(path), 0, 10) == 4


def test_a_parquet_file_is_split_into_runs_of_row_groups(tmp_path):
    rows = [{"text": f"document {i} " * (i % 9 + 1), "url": f"u{i}"} for i in range(200)]
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=10)
    expected = whole([str(path)])
    units, docs = read_planned([str(path)], split_bytes=1500)
    assert len(units) >= 4
    assert all(len(u.pieces) == 1 and not u.pieces[0].whole for u in units)
    assert docs == expected
    assert [d[0] for d in docs][:2] == [f"{path}#1", f"{path}#2"]


def test_small_files_are_packed_in_order_and_streams_are_never_split(tmp_path):
    lines = jsonl_lines(40)
    small = []
    for i in range(6):
        small.append(tmp_path / f"small-{i}.jsonl")
        small[-1].write_bytes(b"".join(lines[i * 5 : i * 5 + 5]))
    stream = tmp_path / "stream.jsonl.gz"
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "gzip") as out:
        out.write(b"".join(jsonl_lines(300)))
    stream.write_bytes(sink.getvalue().to_pybytes())
    paths = [str(p) for p in small] + [str(stream)]
    split = 2 * max(p.stat().st_size for p in small) + 1
    units, docs = read_planned(paths, split)
    assert docs == whole(paths)
    packed = [u for u in units if len(u.pieces) > 1]
    assert packed, "small files share units"
    assert all(sum(p.size for p in u.pieces) <= split for u in packed)
    streams = [p for u in units for p in u.pieces if p.path == str(stream)]
    assert len(streams) == 1 and streams[0].whole
    assert stream.stat().st_size > split  # big, and still one piece


def test_the_embedded_corpus_is_one_unit():
    (unit,) = plan_reads([], 1 << 20)
    assert len(unit.pieces) == 1
