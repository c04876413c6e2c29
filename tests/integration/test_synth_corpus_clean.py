"""`lmforge run --until clean` on a synthetic `.jsonl.zst` corpus (the calibration's
`synthetic_corpus.py`, as bench/corpus_synth.py writes it): every file is read, the planted exact
copies and only they are removed as exact duplicates, each traced to its original, and the near
copies are found."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_runner import lmforge_here, status

from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray]

FILTERS_OFF = [
    f"data.filters.{step}.enabled=false"
    for step in (
        "length",
        "language",
        "gopher_quality",
        "gopher_repetition",
        "c4",
        "blocklist",
        "toxicity",
        "pii",
    )
]


def test_clean_reads_a_synthetic_zstd_corpus_and_removes_its_planted_copies(tmp_path):
    planted = synthesize(tmp_path / "corpus", docs=600, files=3, seed=11)
    name = planted["id_format"].format
    workdir = tmp_path / "runs"
    lmforge_here(
        "run",
        "--until",
        "clean",
        "preset=tiny",
        f"workdir={workdir}",
        f"data.paths=[{tmp_path / 'corpus'}/*.jsonl.zst]",
        *FILTERS_OFF,
    )
    artifact = Path(status(workdir)["clean"]["artifact"])
    duplicates = pq.read_table(artifact / "duplicates.parquet").to_pylist()
    removed = {r["id"]: (r["kept_id"], r["kind"]) for r in duplicates}
    exact = {r: k for r, (k, kind) in removed.items() if kind == "exact_duplicate"}
    assert exact == {name(copy): name(source) for copy, source in planted["exact"]}
    near = {name(copy) for copy, _, _ in planted["near"]}
    found = {r for r, (_, kind) in removed.items() if kind == "near_duplicate"}
    assert len(found & near) >= 0.9 * len(near)
    assert len(found - near) <= 3
    rows = sum(pq.read_metadata(p).num_rows for p in artifact.glob("*-*.parquet"))
    assert rows + len(removed) == 600
