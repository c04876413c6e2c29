"""A file written in place is whole or absent after a crash: written under one kind of temporary
name in its own directory, fsynced, renamed, its directory fsynced; and every such write in the
code base goes through that one helper."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from lmforge.durable import AtomicFile, is_partial, write_atomic

ROOT = Path(__file__).parents[3]


def test_the_file_appears_whole_under_its_name_and_nothing_temporary_is_left(tmp_path):
    target = tmp_path / "record.json"
    with AtomicFile(target) as out:
        out.write(b"{")
        assert not target.exists(), "nothing under the final name before the commit"
        assert out.partial.parent == tmp_path and is_partial(out.partial)
        assert re.fullmatch(r"\.record\.json\.partial-[0-9a-f]{8}", out.partial.name)
        out.write(b"}")
    assert target.read_bytes() == b"{}"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_a_failed_write_leaves_the_previous_content(tmp_path):
    target = tmp_path / "coefficients.json"
    write_atomic(target, "old")
    with pytest.raises(RuntimeError), AtomicFile(target) as out:
        out.write(b"half of the new")
        raise RuntimeError("killed midway")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["coefficients.json"]


def test_the_file_is_fsynced_before_the_rename_and_the_directory_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source, target):
        events.append(("rename", os.fspath(target)))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(tmp_path / "marker", b"done")
    assert [kind for kind, _ in events] == ["fsync", "rename", "fsync"]
    assert is_partial(events[0][1]) and Path(events[0][1]).parent == tmp_path
    assert events[1][1] == str(tmp_path / "marker") and events[2][1] == str(tmp_path)


def test_a_secret_is_created_readable_by_its_owner_only(tmp_path):
    write_atomic(tmp_path / "token", "s3cr3t", mode=0o600)
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600


RENAMES = re.compile(r"os\.replace\(|os\.rename\(|\.rename\(|\b\w*partial\w*\.replace\(")
PUBLISHERS = {
    "lmforge/durable.py": "the atomic file write itself",
    "pipeline/storage/local_files.py": "a directory renamed into place (artifacts, checkpoints)",
    "pipeline/storage/node_cache.py": "a finished file moved into the node cache",
    "pipeline/training/checkpoint/store.py": "a checkpoint directory downloaded whole",
}
"""The modules that may rename: directories published whole, and the helper."""
TEMPORARY_NAMES = re.compile(r"\.(tmp|partial)[\"']|\.download-")
"""Temporary file names of their own (the helper's are `.<name>.partial-<id>`)."""


def test_every_file_written_in_place_goes_through_the_one_helper():
    offenders = []
    for folder in ("lmforge", "pipeline", "model", "tokenizer"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in PUBLISHERS:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if RENAMES.search(line) or TEMPORARY_NAMES.search(line):
                    offenders.append(f"{rel}:{number}: {line.strip()}")
    assert offenders == [], "write through lmforge.durable (AtomicFile, write_atomic) instead"
