"""A pipeline killed (SIGKILL to the driver's whole process group, no chance to clean up) in the
middle of `clean`, in its filter step or in its dedup steps (in the last of them, paragraph
dedup): the next `lmforge run` reuses every read unit and every dedup task the dead run
finished, runs only the others, and writes data files byte-identical to an uninterrupted
run's.

The killed runs are `lmforge` processes leading their own process group, as in a terminal; the
uninterrupted run and the runs after the kills call the CLI in this process (`main(argv)`), on
the Ray runtime it keeps for such modules (`shares_ray`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_runner import (
    LMFORGE,
    kill_once,
    lmforge_here,
    settled_count,
    status,
    summary,
)

from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray]

UNITS = 12
DOCS_PER_UNIT = 250
"""Enough for a filter task to outlast the kill's polling, and for several paragraph tasks."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    synthesize(out, docs=UNITS * DOCS_PER_UNIT, files=UNITS, seed=3)
    return out


def args(corpus: Path, workdir: Path) -> list[str]:
    return [
        "--until",
        "clean",
        "preset=tiny",
        f"data.paths=[{corpus}/*.jsonl.zst]",
        "data.read_split_mb=0.001",  # every file a read unit of its own
        "data.shard_mb=0.05",
        "data.dedup.paragraph.units_per_task=300",  # several paragraph tasks
        f"workdir={workdir}",
    ]


def data_files(workdir: Path) -> dict[str, str]:
    """sha256 of every file of the committed clean artifact, by relative path."""
    artifact = workdir / "store" / "clean" / status(workdir)["clean"]["key"]
    manifest = json.loads((artifact / "manifest.json").read_text())
    return {f["path"]: f["sha256"] for f in manifest["files"] if f["path"] != "datasheet.md"}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, corpus) -> tuple[dict, dict[str, str]]:
    """The clean summary and data files of a run that nothing interrupted."""
    whole = tmp_path_factory.mktemp("whole")
    lmforge_here("run", *args(corpus, whole))
    finished = summary(whole, "clean")
    assert finished["units_resumed"] == 0
    assert set(finished["dedup_tasks_resumed"].values()) == {0}
    files = data_files(whole)
    assert any(p.startswith("train-") for p in files) and any("excluded" in p for p in files)
    return finished, files


def start_run(corpus: Path, workdir: Path) -> subprocess.Popen:
    """`lmforge run` leading its own process group, as in a terminal."""
    return subprocess.Popen(
        [*LMFORGE, "run", *args(corpus, workdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_a_killed_clean_resumes_from_its_finished_units(tmp_path, corpus, uninterrupted):
    killed = tmp_path / "killed"
    markers = killed / "resume" / "clean"
    kill_once(start_run(corpus, killed), markers, "*/done/filter-*.json", 3)
    finished = settled_count(markers, "*/done/filter-*.json")
    assert 3 <= finished < UNITS, "killed in the middle of the filter phase"

    lmforge_here("run", *args(corpus, killed))
    resumed = summary(killed, "clean")
    assert resumed["units_resumed"] == finished
    assert resumed["read_units"] == UNITS
    assert not list(markers.glob("*")), "the work directory goes once the artifact is committed"

    whole, files = uninterrupted
    assert data_files(killed) == files
    assert resumed["dropped_by_reason"] == whole["dropped_by_reason"]


def test_a_driver_killed_in_the_dedup_steps_resumes_their_finished_tasks(
    tmp_path, corpus, uninterrupted
):
    killed = tmp_path / "killed"
    work = killed / "resume" / "clean"
    # The kill lands once the paragraph step (after exact, near and resolve) has finished a
    # task; the tasks Ray already runs may still finish before it ends the dead driver's job
    # (on an idle machine, the whole step): what the dead run left is what the next one must
    # reuse.
    kill_once(start_run(corpus, killed), work, "*/removals/paragraphs-*.npy", 1)
    # A task's output is its marker: whole or absent (written under a temporary name).
    paragraphs = settled_count(work, "*/removals/paragraphs-*.npy")
    edges = len(list(work.glob("*/removals/edges-b*.npy")))
    exact = len(list(work.glob("*/removals/exact-*.npy")))
    resolved = len(list(work.glob("*/done/resolve.json")))
    assert exact == 1 and edges == 20 and resolved == 1 and paragraphs >= 1, (
        "killed in the dedup steps, in the paragraph one"
    )

    lmforge_here("run", *args(corpus, killed))
    resumed = summary(killed, "clean")
    assert resumed["units_resumed"] == UNITS, "every read unit was filtered before dedup began"
    assert resumed["dedup_tasks_resumed"] == {
        "exact": exact,
        "near": edges,
        "resolve": resolved,
        "paragraph": paragraphs,
    }
    assert not list(work.glob("*")), "the work directory goes once the artifact is committed"

    whole, files = uninterrupted
    assert data_files(killed) == files
    assert resumed["dropped_by_reason"] == whole["dropped_by_reason"]
