"""Ctrl-C during pretrain, sent as a terminal sends it (to the whole process group): the open
MLflow runs, the pipeline's parent run included, become KILLED, completed artifacts stay, and the
next `lmforge run` continues pretraining from the latest checkpoint instead of starting over, with
the losses of an uninterrupted run (rel < 1e-3) at every step; the run was ZeRO-3, and its HF
export still equals the model (weights gathered, not partitioned).

The interrupted run is an `lmforge` process of its own, leading its process group as in a
terminal; the runs after it call the CLI in this process (`main(argv)`), on one Ray runtime."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from cli_runner import LMFORGE, in_process_ray, lmforge_here, small_corpus, status, summary
from fault.training_runs import assert_same_losses

from lmforge.pipeline.engine.tracking import client

pytestmark = pytest.mark.integration

ARGS = [
    "--until",
    "pretrain",
    "preset=tiny",
    "train.zero_stage=3",
    # Ctrl-C comes once the first checkpoint is complete, at step 10 or a little after (saves
    # publish in the background): the 50 steps after it leave it time to land before the run
    # ends, on a fast idle machine too (with 20, a run on an idle Zen 4 finished first)
    "train.max_steps=60",
    "train.checkpoint_every=10",
    # the preset's sequence-level phase on the last 5 steps: after the resume
    "train.sequence_unlikelihood_steps=5",
]


def test_ctrl_c_during_pretrain_resumes_from_the_latest_checkpoint(workdir):
    # 40 documents: what is checked is where training resumes, not what it learns from
    args = [*ARGS, *small_corpus(workdir.parent)]
    proc = subprocess.Popen(
        [*LMFORGE, "run", *args, f"workdir={workdir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.time() + 600
    while not list((workdir / "checkpoints").glob("pretrain/*/step_*/COMPLETE")):
        assert proc.poll() is None, proc.stdout.read()
        assert time.time() < deadline, "no checkpoint within 10 minutes"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)  # the CLI leads its own group, as in a terminal
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, output
    assert "lmforge: interrupted" in output
    states = status(workdir)
    assert states["pretrain"]["state"] == "killed"
    assert states["tokenize"]["state"] == "ran"
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    killed = mlflow.get_run(states["pretrain"]["mlflow_run_id"])
    assert killed.info.status == "KILLED"
    parent = mlflow.get_run(killed.data.tags["mlflow.parentRunId"])
    assert parent.info.status == "KILLED", "the pipeline's parent run is closed as KILLED"

    with in_process_ray():
        lmforge_here("run", *args, f"workdir={workdir}")
        after = status(workdir)
        assert after["tokenize"]["state"] == "cached"
        trained = summary(workdir, "pretrain")
        assert trained["resumed_from_step"] >= 10
        assert trained["steps"] == 60
        artifact = workdir / "store" / "pretrain" / after["pretrain"]["key"]
        resumed_losses = _losses(artifact)

        from transformers import AutoModelForCausalLM

        from lmforge.model.weights import load_model_dir

        ours = load_model_dir(artifact / "model").eval()
        hf = AutoModelForCausalLM.from_pretrained(artifact / "hf").eval()
        ids = torch.randint(
            0, ours.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)
        )
        with torch.no_grad():
            assert (ours(ids)[0] - hf(ids).logits).abs().max() < 1e-4

        # The uninterrupted reference: the same trajectory from step 0 (keep_checkpoints does not
        # change it, but it changes the cache key) once the checkpoints to resume from are gone.
        shutil.rmtree(workdir / "checkpoints")
        lmforge_here("run", *args, "train.keep_checkpoints=3", f"workdir={workdir}")
        rerun = status(workdir)["pretrain"]
        assert rerun["state"] == "ran" and rerun["key"] != after["pretrain"]["key"]
        reference = summary(workdir, "pretrain")
        assert reference.get("resumed_from_step") is None and reference["steps"] == 60
        uninterrupted = _losses(workdir / "store" / "pretrain" / rerun["key"])
        assert_same_losses(resumed_losses, uninterrupted, rel=1e-3)


def _losses(artifact: Path) -> list[float]:
    """The per-step training losses of a pretrain artifact, 1..max_steps."""
    return json.loads((artifact / "training_summary.json").read_text())["losses"]
