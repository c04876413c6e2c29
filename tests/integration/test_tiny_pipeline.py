"""The whole `tiny` pipeline on real Ray, DeepSpeed and MLflow: it learns, it caches, it reruns
exactly what changed, and MLflow holds the lineage.

The run is the demo's (`make demo`: `lmforge run preset=tiny`, an `lmforge` process) on a shorter
training run: its steps run, the model beats the unigram baseline and the model card is written.
The demo's quality bar (beating the bigram, over three training seeds of the whole 1250-step
run) is `bench/demo_quality.py`'s (tests/unit/bench/test_demo_quality_bar.py): 100 steps learn
what a unigram cannot (its training loss is below the unigram's 6.36 from step 30 on; 200 steps
reached val perplexity 215 against the unigram's 577), not yet what a bigram does (144). The
training steps are most of the run's CPU time.
The commands after it call the CLI in this process (`main(argv)`)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import LMFORGE, lmforge, lmforge_here, status, summary
from dead_driver import dead_driver, orphan_pipeline
from headless_chromium import HeadlessPage, chromium
from mlflow_server import wait_until_healthy

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.tracking import client
from lmforge.pipeline.training.precision import cpu_autocasts, cpu_bf16_unit

DEMO_RUN_TIMEOUT_S = 1800
"""The shorter run takes a fraction of the demo's 14-15 minutes on the slowest machine the demo
has run on, and up to twice its time beside the other worker's tests in `make test`: the first
test, which makes it, gets more than the suite's 900 s."""

pytestmark = [
    pytest.mark.integration,
    pytest.mark.shares_ray,
    pytest.mark.timeout(DEMO_RUN_TIMEOUT_S),
]

STEPS, PHASE = 100, 20
"""Training steps of the shorter run, and its last steps in the preset's sequence-level
unlikelihood phase (the demo: 1250 and 300)."""

TINY = [
    "preset=tiny",  # the demo's configuration, as `make demo` runs it
    f"train.max_steps={STEPS}",
    f"train.sequence_unlikelihood_steps={PHASE}",
    f"train.checkpoint_every={STEPS // 2}",  # a checkpoint midway and at the end, as the demo
]

ALL = {
    "clean",
    "train_tokenizer",
    "tokenize",
    "sample_index",
    "pretrain",
    "perplexity",
    "sample",
    "harm",
    "report",
}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tiny") / "runs"
    proc = lmforge("run", *TINY, f"workdir={workdir}", timeout=DEMO_RUN_TIMEOUT_S)
    return workdir, proc, status(workdir)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tiny_pipeline_runs_every_stage_to_completion(first_run):
    workdir, proc, states = first_run
    assert {name: s["state"] for name, s in states.items()} == {name: "ran" for name in ALL}
    assert "model_card.md" in proc.stdout and "lmforge ui" in proc.stdout
    # the run ends with the model card's answer: figures, verdicts, a greedy completion
    assert re.search(r"^model: val perplexity \d+\.\d \(95% interval ", proc.stdout, re.M)
    assert re.search(
        r"^ {7}(beats|does not beat|not distinguishable from) the add-k ", proc.stdout, re.M
    )
    assert re.search(r"^ {7}greedy: .+ -> ", proc.stdout, re.M)


def test_the_run_trains_its_steps_on_the_demos_layout(first_run):
    workdir, _, states = first_run
    trained = summary(workdir, "pretrain")
    manifest = json.loads((Path(states["pretrain"]["artifact"]) / "manifest.json").read_text())
    config = manifest["config"]
    assert trained["steps"] == STEPS
    batch, window = config["train"]["global_batch_size"], config["model"]["block_size"]
    assert trained["tokens"] == STEPS * batch * window
    assert trained["world_size"] >= 2 and config["train"]["zero_stage"] >= 1
    # The preset trains in bf16 where AVX512-BF16 computes it, in fp32 elsewhere (AMX too:
    # `train.precision=bf16_if_native_except_amx`)
    chosen = config["train"]["precision"]
    assert chosen == "bf16_if_native_except_amx"
    expected = "bf16" if cpu_autocasts(chosen, cpu_bf16_unit()) else "fp32"
    assert trained["precision"] == expected, trained


def test_validation_perplexity_beats_initialisation_and_vocabulary_size(first_run):
    workdir, _, _ = first_run
    stats = summary(workdir, "perplexity")
    assert stats["val_perplexity"] < stats["init_perplexity"]
    assert stats["val_perplexity"] < stats["vocab_size"]
    assert stats["val_perplexity"] < stats["unigram_perplexity"]


def test_the_whole_validation_split_is_scored_with_an_interval_and_three_baselines(first_run):
    workdir, _, _ = first_run
    stats = summary(workdir, "perplexity")
    assert stats["val_tokens_scored"] >= 25_000
    assert stats["val_perplexity_ci_low"] < stats["val_perplexity"]
    assert stats["val_perplexity"] < stats["val_perplexity_ci_high"]
    assert stats["kn_trigram_perplexity"] < stats["bigram_perplexity"]
    for baseline in ("unigram", "bigram", "kn_trigram"):
        ratio = stats["val_perplexity"] / stats[f"{baseline}_perplexity"]
        assert stats[f"{baseline}_ratio_ci_low"] < ratio < stats[f"{baseline}_ratio_ci_high"]


def test_the_model_card_opens_with_the_comparison_and_completions(first_run):
    workdir, _, states = first_run
    card = (Path(states["report"]["artifact"]) / "model_card.md").read_text(encoding="utf-8")
    sections = re.findall(r"^## (.+)$", card, flags=re.MULTILINE)
    assert sections[:3] == [
        "How the model compares",
        "Three completions (greedy)",
        "What these figures do not show",
    ]
    assert "Kneser-Ney trigram" in card and "95% interval" in card
    assert f"Its last {PHASE} training steps added a sequence-level unlikelihood term" in card
    sample = summary(workdir, "sample")
    for key in ("greedy_max_top_word_share", "greedy_max_word_4gram_count"):
        assert key in sample
    assert 0 < sample["top_p_word_distinct_2"] <= 1


def test_mlflow_holds_one_parent_with_one_nested_run_per_stage(first_run):
    workdir, _, states = first_run
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = mlflow.get_experiment_by_name("lmforge")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = mlflow.search_runs([experiment.experiment_id], max_results=1000)
    children = [r for r in runs if r.data.tags.get("lmforge.stage")]
    parents = {r.data.tags["mlflow.parentRunId"] for r in children}
    assert len(parents) == 1
    parent = mlflow.get_run(parents.pop())
    assert parent.info.status == "FINISHED"
    by_stage = {r.data.tags["lmforge.stage"]: r for r in children}
    assert set(by_stage) == ALL
    for name, run in by_stage.items():
        assert run.info.status == "FINISHED"
        assert run.info.run_id == states[name]["mlflow_run_id"]
        assert run.data.tags["lmforge.cache_key"] == states[name]["key"]
        assert run.data.tags["lmforge.cached"] == "false"
    assert by_stage["pretrain"].data.tags["lmforge.inputs"].count("=") == 3
    assert "loss" in by_stage["pretrain"].data.metrics
    for part in ("compute", "comm", "optimizer", "data", "log", "checkpoint"):
        assert f"time_{part}_s" in by_stage["pretrain"].data.metrics
    assert "data_wait_s" in by_stage["pretrain"].data.metrics
    assert by_stage["clean"].inputs.dataset_inputs, "clean logs its dataset with log_input"
    # the preset's sequence-level unlikelihood phase: its last steps (PHASE of STEPS), logged
    # every 10
    train = compose(TINY)["train"]
    last, every = train["max_steps"], train["log_every"]
    logged = list(range(last - train["sequence_unlikelihood_steps"] + every, last + 1, every))
    history = mlflow.get_metric_history(
        states["pretrain"]["mlflow_run_id"], "sequence_unlikelihood"
    )
    assert sorted(m.step for m in history) == logged
    assert all(m.value > 0 for m in history)
    # beside it, the share of the step's greedy continuations that repeat a 4-gram: a term
    # above zero needs at least one
    shares = mlflow.get_metric_history(states["pretrain"]["mlflow_run_id"], "looping_share")
    assert sorted(m.step for m in shares) == logged
    assert all(0 < m.value <= 1 for m in shares)


@pytest.fixture
def ui_server(first_run):
    """`lmforge ui` for the run's workdir on a free loopback port."""
    workdir, _, _ = first_run
    port = free_port()
    proc = subprocess.Popen(
        [*LMFORGE, "ui", f"workdir={workdir}", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, proc, "lmforge ui", timeout_s=120)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _row(run_id: str) -> str:
    return f"document.querySelector('[role=row][row-id=\"{run_id}\"]')"


def test_the_mlflow_ui_shows_the_pipeline_run_with_its_nested_stage_runs(
    first_run, tmp_path, ui_server
):
    """What a person sees: `lmforge ui` opened in headless Chromium shows the pipeline run,
    and expanding it shows one nested run per stage. The screenshot is kept as a test artifact
    (in $LMFORGE_TEST_ARTIFACTS if set, else in pytest's temporary directory)."""
    binary = chromium()
    workdir, _, stages = first_run
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    children = {name: entry["mlflow_run_id"] for name, entry in stages.items()}
    parent = mlflow.get_run(mlflow.get_run(children["clean"]).data.tags["mlflow.parentRunId"])
    experiment = parent.info.experiment_id
    artifacts = Path(os.environ.get("LMFORGE_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "mlflow_ui_nested_runs.png"

    async def look() -> None:
        async with HeadlessPage(binary, tmp_path / "chromium-profile") as page:
            await page.call("Page.enable")
            await page.call("Page.navigate", url=f"{ui_server}/#/experiments/{experiment}/runs")
            await page.wait_for(
                f"{_row(parent.info.run_id)}?.innerText.includes('{parent.info.run_name}')",
                f"the pipeline run {parent.info.run_name}",
            )
            toggle = "button[data-component-id*=runnamecell]"  # the +/- beside a parent's name
            expander = f"{_row(parent.info.run_id)}.querySelector('{toggle}')"
            assert await page.evaluate(f"!!{expander}"), "the pipeline run cannot be expanded"
            await page.evaluate(f"{expander}.click()")
            for name, run_id in children.items():
                await page.wait_for(
                    f"{_row(run_id)}?.innerText.includes('{name}')", f"the nested run {name}"
                )
            await page.screenshot(shot)

    asyncio.run(look())
    print(f"screenshot: {shot}", file=sys.stderr)
    assert shot.stat().st_size > 10_000


def test_every_stage_records_its_measured_cost_beside_the_estimate(first_run):
    workdir, _, states = first_run
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    for name, state in states.items():
        manifest = json.loads((Path(state["artifact"]) / "manifest.json").read_text())
        record = manifest["estimate"]
        assert "error" not in record, (name, record)
        for key in ("predicted_s", "measured_s", "predicted_peak_rss_mb", "measured_peak_rss_mb"):
            assert record[key] > 0, (name, key)
        assert abs(record["measured_s"] - manifest["duration_s"]) < 1.0
        assert record["measured_peak_rss_mb"] == max(record["measured"].values())
        metrics = mlflow.get_run(state["mlflow_run_id"]).data.metrics
        assert metrics["estimate_measured_s"] == record["measured_s"]
        assert metrics["estimate_predicted_peak_rss_mb"] == record["predicted_peak_rss_mb"]
    pretrain = json.loads((Path(states["pretrain"]["artifact"]) / "manifest.json").read_text())
    assert pretrain["estimate"]["measured"]["rank_rss_mb"] > 100  # rank 0's own peak


def test_second_unchanged_run_is_all_cache_hits(first_run):
    workdir, _, before = first_run
    started = time.time()
    lmforge_here("run", *TINY, f"workdir={workdir}")
    elapsed = time.time() - started
    after = status(workdir)
    assert {s["state"] for s in after.values()} == {"cached"}
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    for name, entry in after.items():
        run = mlflow.get_run(entry["mlflow_run_id"])
        assert run.data.tags["lmforge.cached"] == "true"
        assert run.data.tags["lmforge.source_run_id"] == before[name]["mlflow_run_id"]
    print(f"cached run took {elapsed:.1f}s")


def test_runs_left_running_by_a_killed_driver_become_killed_on_the_next_invocation(first_run):
    workdir, _, _ = first_run
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = mlflow.get_experiment_by_name("lmforge").experiment_id
    orphans = orphan_pipeline(mlflow, experiment, dead_driver())  # as a SIGKILL leaves them
    lmforge_here("run", *TINY, f"workdir={workdir}")
    assert {mlflow.get_run(run).info.status for run in orphans} == {"KILLED"}


def test_rerun_perplexity_executes_that_stage_and_nothing_else(first_run):
    workdir, _, _ = first_run
    lmforge_here("rerun", "perplexity", *TINY, f"workdir={workdir}")
    states = {name: s["state"] for name, s in status(workdir).items()}
    assert states.pop("perplexity") == "ran"
    assert set(states.values()) == {"cached"}


def test_the_trained_model_loads_back_from_its_mlflow_run(first_run, monkeypatch):
    import mlflow

    workdir, _, states = first_run
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{workdir / 'mlflow.db'}")
    uri = summary(workdir, "pretrain")["mlflow_model_uri"]
    model = mlflow.pyfunc.load_model(uri)
    [completion] = model.predict(["The Python interpreter"], params={"max_new_tokens": 5})
    assert isinstance(completion, str) and completion
    logged = mlflow.get_logged_model(uri.split("/")[-1])
    assert logged.source_run_id == states["pretrain"]["mlflow_run_id"]


def test_inspect_clean_counts_every_removal_and_shows_at_most_limit_each(first_run):
    workdir, _, _ = first_run
    dropped = summary(workdir, "clean")["dropped_by_reason"]
    proc = lmforge_here("inspect", "clean", "--limit", "2", *TINY, f"workdir={workdir}")
    shown = {
        reason: int(n)
        for reason, n in re.findall(r"^== \S+ / (\S+): (\d+) documents$", proc.stdout, re.M)
    }
    assert shown == {reason: n for reason, n in dropped.items() if n}
    blocks = re.split(r"^== .*$", proc.stdout, flags=re.M)[1:]
    assert all(0 < len([ln for ln in b.splitlines() if ln.startswith("  ")]) <= 2 for b in blocks)


def test_inspect_clean_lists_the_most_repeated_lines_paragraph_dedup_removed(first_run):
    from lmforge.pipeline.stages.clean.paragraph_removal import most_repeated_units

    workdir, _, _ = first_run
    artifact = workdir / "store" / "clean" / status(workdir)["clean"]["key"]
    top = most_repeated_units(artifact, 3)
    assert top and summary(workdir, "clean")["paragraph_dedup"]["units_removed"] > 0
    proc = lmforge_here(
        "inspect",
        "clean",
        "--filter",
        "paragraph_dedup",
        "--limit",
        "3",
        *TINY,
        f"workdir={workdir}",
    )
    assert "== paragraph_dedup: the most repeated units removed" in proc.stdout
    rows = re.findall(r"^ +(\d+) +(\d+)  (.*)$", proc.stdout, re.M)
    assert [(int(d), int(r)) for d, r, _ in rows] == [(u["documents"], u["removed"]) for u in top]
    assert all(int(d) >= 3 for d, _, _ in rows), "a unit counts from data.dedup.paragraph.min_docs"
