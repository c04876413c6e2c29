"""Shard files written from staged pages: O_DIRECT where the file system takes it, the same
bytes through the page cache where it does not, the checksum of exactly those bytes either way,
and staging regions that stay from one save to the next."""

from __future__ import annotations

import errno
import hashlib
import mmap
import os

import pytest
import torch
import xxhash

from lmforge.pipeline.training.checkpoint import direct_write
from lmforge.pipeline.training.checkpoint.direct_write import ALIGN, address, write_file
from lmforge.pipeline.training.checkpoint.staging import StagingArea


def _region(nbytes: int) -> memoryview:
    area = StagingArea()
    numel = nbytes // 4
    region = area.region("body", numel)
    region.copy_(torch.arange(numel, dtype=torch.float32) * 0.5 + 1)
    _region.keep = area  # the mapping must outlive the view
    return memoryview(region.numpy()).cast("B")


def _opened_flags(monkeypatch) -> list[int]:
    flags: list[int] = []
    real = os.open

    def recording(path, flag, *args):
        flags.append(flag)
        return real(path, flag, *args)

    monkeypatch.setattr(direct_write.os, "open", recording)
    return flags


@pytest.mark.parametrize("nbytes", [0, 400, ALIGN, 3 * ALIGN + 20, 5 * ALIGN + 4])
def test_the_file_is_head_then_body_and_its_checksum_covers_exactly_those_bytes(
    tmp_path, monkeypatch, nbytes
):
    monkeypatch.setattr(direct_write, "CHUNK", 2 * ALIGN)  # several body writes
    flags = _opened_flags(monkeypatch)
    head, body = b"H" * ALIGN, _region(nbytes)
    size, digest = write_file(tmp_path / "f", head, body, "xxh3_128")
    content = (tmp_path / "f").read_bytes()
    assert content == head + bytes(body)
    assert size == len(content)
    assert digest == xxhash.xxh3_128(content).hexdigest()
    assert flags and all(f & os.O_DIRECT for f in flags)  # tmp_path's disk takes O_DIRECT


def test_a_file_system_that_refuses_o_direct_gets_the_same_bytes_through_the_page_cache(
    tmp_path, monkeypatch
):
    real = os.open

    def refusing(path, flag, *args):
        if flag & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")  # what tmpfs answers
        return real(path, flag, *args)

    monkeypatch.setattr(direct_write.os, "open", refusing)
    head, body = b"h" * ALIGN, _region(3 * ALIGN + 8)
    size, digest = write_file(tmp_path / "f", head, body, "sha256")
    content = (tmp_path / "f").read_bytes()
    assert content == head + bytes(body) and size == len(content)
    assert digest == hashlib.sha256(content).hexdigest()


def test_a_head_or_body_off_the_page_grid_is_written_buffered(tmp_path, monkeypatch):
    flags = _opened_flags(monkeypatch)
    body = _region(2 * ALIGN)[4:]  # 4 bytes past a page
    assert address(body) % ALIGN
    write_file(tmp_path / "f", b"x" * ALIGN, body, "xxh3_128")
    write_file(tmp_path / "g", b"x" * 100, _region(ALIGN), "xxh3_128")
    assert not any(f & os.O_DIRECT for f in flags)
    assert (tmp_path / "f").read_bytes() == b"x" * ALIGN + bytes(body)


def test_a_fault_drill_fires_between_the_first_tensor_and_the_rest(tmp_path):
    body = _region(ALIGN)
    seen = []
    write_file(
        tmp_path / "f",
        b"x" * ALIGN,
        body,
        "xxh3_128",
        midway=lambda: seen.append((tmp_path / "f").stat().st_size),
        split_at=1000,
    )
    # buffered: the size on disk may lag, but the drill fired once, before the whole file
    assert len(seen) == 1 and seen[0] <= ALIGN + 1000
    assert (tmp_path / "f").read_bytes() == b"x" * ALIGN + bytes(body)


def test_staging_regions_are_page_aligned_and_reused_while_their_size_holds():
    area = StagingArea()
    first = area.region("model", 3000)
    assert first.data_ptr() % mmap.PAGESIZE == 0
    assert area.region("model", 3000).data_ptr() == first.data_ptr()
    other = area.region("model", 5000)
    assert other.numel() == 5000 and other.data_ptr() % mmap.PAGESIZE == 0
    assert area.region("empty", 0).numel() == 0
