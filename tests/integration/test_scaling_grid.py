"""`lmforge scaling run` then `scaling fit --sweep` through the CLI, on 40 documents of the
embedded corpus: a toy grid of 3 budgets x 3 of the smallest shapes (one layer, widths 16-48,
a 512-token vocabulary so the budgets stay small), 52-540 steps each, two variants side by side
on one training worker each.

One module fixture runs the grid, runs the same command again (nothing left to run), and fits
it; the tests read what it left: the sweep's record, the store and MLflow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import lmforge_here, small_corpus

from lmforge.pipeline.engine.tracking import client, resolve_tracking_uri

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray]

TOY = [
    "preset=tiny", "model.d_model=64", "model.n_layer=2", "model.d_ff=256",
    "model.block_size=64", "tokenizer.vocab_size=512", "train.global_batch_size=48",
    "train.micro_batch_size=48", "train.num_workers=1", "train.local_mode=true",
    "train.sequence_unlikelihood=0",
    "train.checkpoint_every=1000", "train.log_every=50",
]  # fmt: skip
GRID = [
    "--budgets", "6e10,9e10,1.35e11", "--sizes", "3", "--max-epochs", "1000",
    "--eval-tokens", "4096", "--max-concurrent", "2",
]  # fmt: skip
SHARED = ("clean", "train_tokenizer", "tokenize")


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("scaling")
    corpus = small_corpus(tmp_path_factory.mktemp("corpus"))
    command = ["scaling", "run", *GRID, *TOY, *corpus, f"workdir={workdir}"]
    ran = lmforge_here(*command)
    first = _record(workdir)
    again = lmforge_here(*command)  # finished before: nothing runs
    fit = lmforge_here(
        "scaling", "fit", "--sweep", "latest", "--bootstrap", "10", f"workdir={workdir}"
    )
    return {
        "workdir": workdir,
        "ran": ran.stdout,
        "first": first,
        "again": again.stdout,
        "fit": fit.stdout,
    }


def _record(workdir: Path) -> dict:
    (path,) = (workdir / "sweeps").glob("sweep-*.json")
    return json.loads(path.read_text())


def _manifest(workdir: Path, stage: str, key: str) -> dict:
    return json.loads((workdir / "store" / stage / key / "manifest.json").read_text())


def test_the_grid_runs_as_one_sweep_its_variants_stopping_after_perplexity(grid):
    workdir, record = grid["workdir"], _record(grid["workdir"])
    assert record["state"] == "finished" and record["until"] == "perplexity"
    variants = record["variants"]
    assert len(variants) == 9 and all(v["state"] == "finished" for v in variants)
    for stage in SHARED:  # computed once, before the variants: a cache hit for each
        assert len({v["stages"][stage] for v in variants}) == 1
        assert {v["stage_states"][stage] for v in variants} == {"cached"}
    assert all(set(v["stages"]) & {"sample", "harm", "report"} == set() for v in variants)
    assert len({v["stages"]["pretrain"] for v in variants}) == 9
    scored = {
        _manifest(workdir, "perplexity", v["stages"]["perplexity"])["summary"]["val_tokens_scored"]
        for v in variants
    }
    assert len(scored) == 1 and 0 < scored.pop() <= 4096  # one slice, the same for every run

    scaling = record["scaling"]
    assert scaling["budgets"] == [6e10, 9e10, 1.35e11]
    for v in variants:
        planned = scaling["variants"][v["variant"]]
        trained = _manifest(workdir, "pretrain", v["stages"]["pretrain"])
        assert trained["summary"]["tokens"] == planned["tokens"]
        assert trained["config"]["train"]["lr"] == pytest.approx(planned["lr"])
        width = int(v["params"]["model.d_model"])  # the preset's rate at width 64, by width
        assert float(v["params"]["train.lr"]) == pytest.approx(3e-3 * 64 / width, rel=1e-3)
    assert f"fit it: lmforge scaling fit --sweep {record['sweep_id']}" in grid["ran"]


def test_running_the_same_grid_again_runs_nothing(grid):
    before = {v["variant"]: v["pipeline_runs"] for v in grid["first"]["variants"]}
    after = {v["variant"]: v["pipeline_runs"] for v in _record(grid["workdir"])["variants"]}
    assert after == before
    assert f"fit it: lmforge scaling fit --sweep {grid['first']['sweep_id']}" in grid["again"]


def test_the_fit_reads_the_sweep_and_nests_its_mlflow_run_under_the_sweeps(grid):
    workdir, record = grid["workdir"], _record(grid["workdir"])
    fit = json.loads((workdir / "scaling" / record["sweep_id"] / "fit.json").read_text())
    assert fit["sweep_id"] == record["sweep_id"] and len(fit["runs"]) == 9
    assert sorted({r["budget"] for r in fit["runs"]}) == [6e10, 9e10, 1.35e11]
    first = record["variants"][0]["stages"]
    assert fit["corpus"] == {
        "clean": [first["clean"]],
        "train_tokenizer": [first["train_tokenizer"]],
    }
    for run in fit["runs"]:
        variant = next(v for v in record["variants"] if v["variant"] == run["label"])
        assert run["loss"] == pytest.approx(variant["metrics"]["val_loss"])
    assert "L(N, D) =" in grid["fit"]
    assert "`lmforge rerun report`" in grid["fit"]  # how an earlier model card shows the fit

    mlflow = client(resolve_tracking_uri(workdir, None))
    fit_run = mlflow.get_run(fit["mlflow_run_id"])
    assert fit_run.data.tags["mlflow.parentRunId"] == record["mlflow_run_id"]
    experiment = fit_run.info.experiment_id
    nested = mlflow.search_runs(
        [experiment], f"tags.`mlflow.parentRunId` = '{record['mlflow_run_id']}'"
    )
    assert len(nested) == 10  # the 9 variants' pipeline runs and the fit
    assert {r.info.status for r in nested} == {"FINISHED"}
