"""Through the CLI: a damaged cached artifact is reported in one warning line naming the file and
recomputed, the damaged copy kept; `--verify` finds corruption that leaves sizes and times alone.

The runs call the CLI in this process (`main(argv)`, on one Ray runtime), but for the
last: an `lmforge` process of its own, whose output shows the warning as a user sees it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from cli_runner import lmforge, lmforge_here, small_corpus, status

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray]


def _args(workdir, *flags):
    # What is checked is the cache, whatever it holds (`clean` of the whole embedded corpus
    # took a third of each run).
    return ["run", "--until", "clean", *flags, *small_corpus(workdir.parent), f"workdir={workdir}"]


def _shard(artifact: Path) -> Path:
    """The first data file (`excluded.parquet/` and `duplicates.parquet/` are dataset folders)."""
    return sorted(p for p in artifact.rglob("*.parquet") if p.is_file())[0]


def test_a_corrupt_cache_hit_is_named_and_recomputed_never_used(workdir, caplog):
    lmforge_here(*_args(workdir))
    artifact = Path(status(workdir)["clean"]["artifact"])
    shard = _shard(artifact)
    original = shard.read_bytes()
    stamp = shard.stat()
    shard.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))  # bit rot: size, time kept
    os.utime(shard, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert status(workdir)["clean"]["state"] == "ran"
    lmforge_here(*_args(workdir))
    assert status(workdir)["clean"]["state"] == "cached"  # sizes only, without --verify

    with caplog.at_level(logging.WARNING, logger="lmforge"):
        lmforge_here(*_args(workdir, "--verify"))
    warnings = [r.getMessage() for r in caplog.records if "warning" in r.getMessage()]
    rel = shard.relative_to(artifact).as_posix()
    assert len(warnings) == 1 and rel in warnings[0] and "sha256" in warnings[0]
    assert "\n" not in warnings[0]
    assert status(workdir)["clean"]["state"] == "ran"
    assert _shard(artifact).read_bytes() == original  # the same key, recomputed
    kept = list((artifact.parent / ".replaced").glob(f"*/{rel}"))
    assert len(kept) == 1 and kept[0].read_bytes() != original

    _shard(artifact).write_bytes(b"truncated")
    proc = lmforge(*_args(workdir))
    warnings = [line for line in proc.stdout.splitlines() if "warning" in line]
    assert len(warnings) == 1 and f"{rel} has 9 bytes" in warnings[0], proc.stdout
    assert status(workdir)["clean"]["state"] == "ran"
    assert _shard(artifact).read_bytes() == original
