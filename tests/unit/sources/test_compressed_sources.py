"""Compressed JSONL streams like plain JSONL; broken streams and oversized text files are named."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lmforge.pipeline.sources.compressed import split_compression
from lmforge.pipeline.sources.files import SourceError, read_source

CODECS = {".gz": "gzip", ".zst": "zstd"}


def jsonl_bytes(n: int) -> bytes:
    """n records, a blank line after the third, so line numbers and record numbers differ."""
    lines = [
        json.dumps({"text": f"document {i} " + "word " * (i % 40), "lang": "en"}) for i in range(n)
    ]
    lines.insert(3, "")
    return ("\n".join(lines) + "\n").encode("utf-8")


def write(path: Path, data: bytes) -> Path:
    codec = CODECS.get(path.suffix.lower())
    if codec is None:
        path.write_bytes(data)
    else:
        with pa.output_stream(str(path), compression=codec) as out:
            out.write(data)
    return path


def documents(path: Path, **kwargs) -> list[tuple[str, str, dict]]:
    """(id without the file, text, meta) of each document."""
    return [(d.id.split("#")[1], d.text, d.meta) for d in read_source(str(path), **kwargs)]


@pytest.mark.parametrize(
    "name", ["a.jsonl.gz", "a.jsonl.zst", "a.json.gz", "a.ndjson.gz", "a.ndjson.zst", "A.JSONL.ZST"]
)
def test_compressed_jsonl_gives_the_documents_and_line_ids_of_the_plain_file(tmp_path, name):
    data = jsonl_bytes(300)
    plain = documents(write(tmp_path / "plain.jsonl", data))
    compressed = write(tmp_path / name, data)
    docs = list(read_source(str(compressed)))
    assert [(d.id.split("#")[1], d.text, d.meta) for d in docs] == plain
    assert len(plain) == 300 and plain[3][0] == "5"
    assert docs[0].id == f"{compressed}#1" and docs[0].source == str(compressed)


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_truncated_stream_fails_naming_the_file_after_the_complete_documents(tmp_path, suffix):
    data = jsonl_bytes(40_000)  # 3.6 MB: the cut lands past the first decompressed blocks
    whole = write(tmp_path / f"whole.jsonl{suffix}", data).read_bytes()
    cut = tmp_path / f"cut.jsonl{suffix}"
    cut.write_bytes(whole[: len(whole) // 2])
    read: list = []
    with pytest.raises(SourceError) as info:
        read.extend(read_source(str(cut)))
    message = str(info.value)
    assert str(cut) in message and "truncated" in message and "data.on_error=skip" in message
    assert "\n" not in message
    complete = documents(write(tmp_path / "plain.jsonl", data))
    assert 0 < len(read) < len(complete)
    assert [(d.id.split("#")[1], d.text, d.meta) for d in read] == complete[: len(read)]


@pytest.mark.parametrize("name", ["junk.jsonl.zst", "junk.jsonl.gz"])
def test_a_file_that_is_not_what_its_suffix_says_fails_naming_it(tmp_path, name):
    bad = tmp_path / name
    bad.write_bytes(b'{"text": "not compressed at all"}\n' * 20)
    with pytest.raises(SourceError, match="corrupt or truncated") as info:
        list(read_source(str(bad)))
    assert name in str(info.value)


def test_compressed_text_is_refused_with_what_to_do(tmp_path):
    notes = write(tmp_path / "notes.txt.gz", b"plain prose\n" * 10)
    with pytest.raises(SourceError, match="read as JSONL only") as info:
        list(read_source(str(notes)))
    assert "notes.txt.gz" in str(info.value)


def test_a_text_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * 250_000)  # 1.25 MB
    with pytest.raises(SourceError, match=r"1\.2 MB, over data\.max_text_file_mb=1\b") as info:
        list(read_source(str(big), max_text_mb=1))
    assert "big.txt" in str(info.value)
    (doc,) = read_source(str(big), max_text_mb=2)
    assert len(doc.text) == 1_250_000


@pytest.mark.parametrize(
    "name, expected",
    [
        ("x.jsonl.zst", (".jsonl", "zstd")),
        ("dir.v2/x.json.GZ", (".json", "gzip")),
        ("x.zstd", ("", "zstd")),
        ("x.tar.gz", (".tar", "gzip")),
        ("notes.txt", (".txt", None)),
        ("README", ("", None)),
    ],
)
def test_format_and_codec_come_from_the_last_two_suffixes(name, expected):
    assert split_compression(name) == expected
