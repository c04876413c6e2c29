"""A pipeline killed (SIGKILL, no chance to clean up) in the middle of `clean`: the next
`lmforge run` reuses every read unit the dead run finished, filters only the others, and writes
data files byte-identical to an uninterrupted run's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_runner import LMFORGE, lmforge, status, summary

from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize

pytestmark = pytest.mark.integration

UNITS = 12


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    synthesize(out, docs=UNITS * 1500, files=UNITS, seed=3)
    return out


def args(corpus: Path, workdir: Path) -> list[str]:
    return [
        "--until",
        "clean",
        "preset=tiny",
        f"data.paths=[{corpus}/*.jsonl.zst]",
        "data.read_split_mb=0.001",  # every file a read unit of its own
        "data.shard_mb=0.05",
        f"workdir={workdir}",
    ]


def data_files(workdir: Path) -> dict[str, str]:
    """sha256 of every file of the committed clean artifact, by relative path."""
    artifact = workdir / "store" / "clean" / status(workdir)["clean"]["key"]
    manifest = json.loads((artifact / "manifest.json").read_text())
    return {f["path"]: f["sha256"] for f in manifest["files"] if f["path"] != "datasheet.md"}


def settled_count(root: Path, pattern: str, quiet_s: float = 5.0) -> int:
    """How many files match once none has appeared for `quiet_s` (a task already running in a
    Ray worker may still finish after its driver died)."""
    count, since = -1, time.time()
    while time.time() - since < quiet_s:
        now = len(list(root.glob(pattern)))
        if now != count:
            count, since = now, time.time()
        time.sleep(0.2)
    return count


def test_a_killed_clean_resumes_from_its_finished_units(tmp_path, corpus):
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [*LMFORGE, "run", *args(corpus, killed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.time() + 300
    markers = killed / "resume" / "clean"
    while len(list(markers.glob("*/done/filter-*.json"))) < 3:
        assert proc.poll() is None, proc.stdout.read()
        assert time.time() < deadline, "no read unit finished within 5 minutes"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    finished = settled_count(markers, "*/done/filter-*.json")
    assert 3 <= finished < UNITS, "killed in the middle of the filter phase"

    lmforge("run", *args(corpus, killed))
    resumed = summary(killed, "clean")
    assert resumed["units_resumed"] == finished
    assert resumed["read_units"] == UNITS
    assert not list(markers.glob("*")), "the work directory goes once the artifact is committed"

    whole = tmp_path / "whole"
    lmforge("run", *args(corpus, whole))
    uninterrupted = summary(whole, "clean")
    assert uninterrupted["units_resumed"] == 0
    files = data_files(whole)
    assert any(p.startswith("train-") for p in files) and any("excluded" in p for p in files)
    assert data_files(killed) == files
    assert resumed["dropped_by_reason"] == uninterrupted["dropped_by_reason"]
