"""Ctrl-C during pretrain: the open MLflow runs become KILLED, completed artifacts stay, and the
next `lmforge run` continues pretraining from the latest checkpoint instead of starting over;
the run was ZeRO-3, and its HF export still equals the model (weights gathered, not partitioned)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
import torch
from cli_runner import LMFORGE, lmforge, status, summary

from lmforge.pipeline.tracking import client

pytestmark = pytest.mark.integration

ARGS = [
    "--until",
    "pretrain",
    "preset=tiny",
    "train.zero_stage=3",
    "train.max_steps=120",
    "train.checkpoint_every=10",
]


def test_ctrl_c_during_pretrain_resumes_from_the_latest_checkpoint(workdir):
    proc = subprocess.Popen(
        [*LMFORGE, "run", *ARGS, f"workdir={workdir}"],
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
    os.kill(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, output
    assert "lmforge: interrupted" in output
    states = status(workdir)
    assert states["pretrain"]["state"] == "killed"
    assert states["tokenize"]["state"] == "ran"
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    assert mlflow.get_run(states["pretrain"]["mlflow_run_id"]).info.status == "KILLED"

    lmforge("run", *ARGS, f"workdir={workdir}")
    after = status(workdir)
    assert after["tokenize"]["state"] == "cached"
    trained = summary(workdir, "pretrain")
    assert trained["resumed_from_step"] >= 10
    assert trained["steps"] == 120

    from transformers import AutoModelForCausalLM

    from lmforge.model.weights import load_model_dir

    artifact = workdir / "store" / "pretrain" / after["pretrain"]["key"]
    ours = load_model_dir(artifact / "model").eval()
    hf = AutoModelForCausalLM.from_pretrained(artifact / "hf").eval()
    ids = torch.randint(
        0, ours.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        assert (ours(ids)[0] - hf(ids).logits).abs().max() < 1e-4
