"""`lmforge sweep` on the 40-document corpus and the small model, 20 steps per variant, each
variant stopping after perplexity (`--until perplexity`: the sweeps compare validation figures;
sampling, probing and the model card of a run are the tiny pipeline's tests).

One workdir serves the module: a 2x2 sweep (two learning rates x two widths) whose driver is
killed once a variant is done, then run again; then an early-stopping sweep over a learning rate
that trains and an absurd one, in the same workdir (its trainable variant is the 2x2's, a cache
hit, whose validation losses set ASHA's bar).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cli_runner import (
    LMFORGE,
    SHORT_TINY,
    lmforge_here,
    settled_count,
    small_corpus,
)

from lmforge.pipeline.engine.tracking import client, resolve_tracking_uri

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray]

GRID = ["train.lr=1e-3,3e-3", "model.d_model=32,64"]
EARLY = ["model.d_model=32", "train.lr=1e-3,10", "--early-stop", "--max-concurrent", "1"]
UNTIL = ["--until", "perplexity"]
LATER_STAGES = {"sample", "harm", "report"}
SHARED_STAGES = ("clean", "train_tokenizer", "tokenize", "sample_index")


def common(corpus: list[str], workdir: Path) -> list[str]:
    # val_loss every 4 steps in both sweeps, so a 2x2 variant is a cache hit of the other sweep
    # one training worker a variant, in its stage's own task (`train.local_mode`): two variants
    # train side by side on two CPUs
    return [
        "preset=tiny", *SHORT_TINY, *corpus, "train.eval_every=4", "train.num_workers=1",
        "train.local_mode=true", f"workdir={workdir}", *UNTIL,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("sweep")
    corpus = small_corpus(tmp_path_factory.mktemp("corpus"))
    grid = ["sweep", *common(corpus, workdir), *GRID, "--max-concurrent", "2"]
    proc = subprocess.Popen(
        [*LMFORGE, *grid],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=dict(os.environ),
    )
    _kill_once_a_variant_finished(proc, workdir)
    settled_count(workdir / "store" / "pretrain", "*/manifest.json")
    before = _sweep_record(workdir)
    rerun = lmforge_here(*grid)
    early = lmforge_here("sweep", *common(corpus, workdir), *EARLY)
    return {"workdir": workdir, "before": before, "rerun": rerun.stdout, "early": early.stdout}


def _kill_once_a_variant_finished(proc: subprocess.Popen, workdir: Path) -> None:
    deadline = time.time() + 600
    while True:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else proc.returncode
        assert time.time() < deadline, "no variant finished within 10 minutes"
        records = list((workdir / "sweeps").glob("sweep-*.json"))
        try:
            variants = json.loads(records[0].read_text())["variants"] if records else []
        except ValueError:
            variants = []
        if any(v["state"] == "finished" for v in variants):
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


def _sweep_record(workdir: Path, which: int = 0) -> dict:
    records = sorted(
        (json.loads(p.read_text()) for p in (workdir / "sweeps").glob("sweep-*.json")),
        key=lambda r: r["started_at"],
    )
    return records[which]


def _status(workdir: Path, sweep: str) -> list[dict]:
    return json.loads(
        lmforge_here("status", "--sweep", sweep, "--json", f"workdir={workdir}").stdout
    )


def _stage_runs(workdir: Path) -> dict[tuple[str, str], int]:
    """How many pipeline runs ran each (stage, key), over every record in the workdir."""
    counts: dict[tuple[str, str], int] = {}
    for path in (workdir / "pipeline_runs").glob("*.json"):
        for stage in json.loads(path.read_text())["stages"]:
            if stage["state"] == "ran":
                item = (stage["stage"], stage["key"])
                counts[item] = counts.get(item, 0) + 1
    return counts


def test_a_2x2_sweep_runs_shared_stages_once_and_nests_four_variants_in_mlflow(swept):
    workdir = swept["workdir"]
    sweep = _sweep_record(workdir)
    rows = _status(workdir, sweep["sweep_id"])
    assert len(rows) == 4 and all(r["state"] == "finished" for r in rows), rows
    assert sweep["until"] == "perplexity"  # `--until`: every variant stopped after it
    assert all("perplexity" in r["stages"] and not LATER_STAGES & set(r["stages"]) for r in rows)
    params = sorted((r["params"]["train.lr"], r["params"]["model.d_model"]) for r in rows)
    assert params == [("0.001", "32"), ("0.001", "64"), ("0.003", "32"), ("0.003", "64")]
    figures = [r["metrics"]["val_perplexity"] for r in rows]
    assert figures == sorted(figures) and all(f > 1 for f in figures)  # sorted by the metric
    for stage in SHARED_STAGES:
        assert len({r["stages"][stage] for r in rows}) == 1
        assert _stage_runs(workdir)[(stage, rows[0]["stages"][stage])] == 1, stage
    pretrain_keys = {r["stages"]["pretrain"] for r in rows}
    assert len(pretrain_keys) == 4
    assert pretrain_keys <= {p.name for p in (workdir / "store" / "pretrain").iterdir()}

    mlflow = client(resolve_tracking_uri(workdir, None))
    experiment = mlflow.get_experiment_by_name("lmforge").experiment_id
    parents = mlflow.search_runs(
        [experiment], f"tags.`lmforge.sweep` = '{sweep['sweep_id']}' and tags.`lmforge.swept` != ''"
    )
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    nested = mlflow.search_runs(
        [experiment], f"tags.`mlflow.parentRunId` = '{parents[0].info.run_id}'"
    )
    finished = {
        (run.data.params["train.lr"], run.data.params["model.d_model"])
        for run in nested
        if run.info.status == "FINISHED"
    }
    assert finished == set(params)
    assert "summary/summary.md" in {
        a.path for a in mlflow.list_artifacts(parents[0].info.run_id, "summary")
    }

    table = lmforge_here("status", "--sweep", "latest", f"workdir={workdir}").stdout
    assert "sorted by val_perplexity" in table
    page = Path(
        lmforge_here("report", "--sweep", sweep["sweep_id"], f"workdir={workdir}").stdout.strip()
    )
    assert page.is_file() and (page.parent / "loss_curves.png").is_file()


def test_a_rerun_after_the_driver_died_finishes_only_what_was_unfinished(swept):
    before = {v["variant"]: v for v in swept["before"]["variants"]}
    done_before = [name for name, v in before.items() if v["state"] == "finished"]
    assert done_before and len(done_before) < 4, before  # killed mid-way
    after = {v["variant"]: v for v in _sweep_record(swept["workdir"])["variants"]}
    for name in done_before:  # not run again: the same single pipeline run
        assert after[name]["pipeline_runs"] == before[name]["pipeline_runs"]
    assert all(v["state"] == "finished" for v in after.values())


def test_early_stop_stops_an_absurd_learning_rate_and_records_it_stopped(swept):
    workdir = swept["workdir"]
    sweep = _sweep_record(workdir, which=1)
    rows = {r["params"]["train.lr"]: r for r in _status(workdir, sweep["sweep_id"])}
    good, absurd = rows["0.001"], rows["10"]
    assert good["state"] == "finished" and absurd["state"] == "stopped", rows
    assert absurd["stopped_at"] is not None and absurd["stopped_at"] < 20  # train.max_steps
    assert absurd["metrics"]["val_perplexity"] is not None  # its eval stages ran on its model
    stopped_key = absurd["stages"]["pretrain"]
    manifest = json.loads(
        (workdir / "store" / "pretrain" / stopped_key / "manifest.json").read_text()
    )
    assert manifest["config"]["train"]["stopped_at"] == absurd["stopped_at"]
    stopped = next(v for v in sweep["variants"] if v["variant"] == absurd["variant"])
    assert stopped["stop_requested_at"] is not None  # ASHA's decision, not a failure
    assert len(stopped["pipeline_runs"]) == 2  # the run it stopped, the one that committed it
