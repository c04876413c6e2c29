"""Pretrain interrupted twice, then finished: Ctrl-C, sent as a terminal sends it (to the whole
process group), then the driver SIGKILLed (driver loss, its local Ray runtime dying with it).

- Ctrl-C: the open MLflow runs, the pipeline's parent run included, become KILLED, and completed
  artifacts stay.
- Each next run continues pretraining from the latest checkpoint (asserted from the checkpoint
  steps on disk), and the run that finishes has the losses of an uninterrupted run (rel < 1e-3)
  at every step; the run was ZeRO-3, and its HF export still equals the model (weights
  gathered, not partitioned).
- Nothing of the SIGKILLed run is left once the next run committed: its Ray Train storage,
  temporaries, leases (its stage key's and its lineage's) and unpublished checkpoints are gone,
  its record is `killed` and its MLflow runs KILLED.

The interrupted runs are `lmforge` processes of their own, each leading its process group as in
a terminal; the runs after them call the CLI in this process (`main(argv)`), on one Ray runtime.
The uninterrupted reference is one run on one worker, shared by both checks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from cli_runner import (
    LMFORGE,
    SMALL_MODEL,
    lmforge_here,
    small_corpus,
    status,
)
from fault.training_runs import assert_same_losses

from lmforge.pipeline.engine.run_records import RecordBook
from lmforge.pipeline.engine.tracking import client

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray]

ARGS = [
    "--until",
    "pretrain",
    "preset=tiny",
    *SMALL_MODEL,  # where training resumes is checked, not what it learns: a small model's steps
    "train.zero_stage=3",
    # Each interruption comes once a new checkpoint is complete (saves publish in the
    # background): the steps after it leave it time to land before the run ends, on a fast idle
    # machine too (with 20 steps in all, a run on an idle Zen 4 finished first)
    "train.max_steps=60",
    "train.checkpoint_every=10",
    # the preset's sequence-level phase on the last 5 steps: after the resumes
    "train.sequence_unlikelihood_steps=5",
]
LEFTOVERS = ("*.lease.json", ".tmp-*", "*.partial-*", ".step_*.tmp-*")
"""What a killed run leaves until the next run commits: leases, temporaries, partial files,
checkpoints it had not published."""


@dataclass
class Interrupted:
    """What each run of the module's sequence left, for the tests to check."""

    workdir: Path
    ctrl_c: subprocess.CompletedProcess
    after_ctrl_c: dict[str, dict]
    """`status` once the Ctrl-C'd run exited."""
    ctrl_c_step: int
    """The newest complete checkpoint the Ctrl-C'd run left."""
    killed: subprocess.CompletedProcess
    killed_step: int
    """The newest complete checkpoint the SIGKILLed run left."""
    killed_run: str
    """The pipeline run id of the SIGKILLed run."""
    finished: dict[str, dict]
    """`status` once the next run finished pretraining."""
    left_after_kill: list[str]
    """Files of the kind `LEFTOVERS` names that the SIGKILLed run left, before the next run."""
    resumed_losses: list[float]
    uninterrupted_losses: list[float]
    reference_key: str


def _newest_step(workdir: Path) -> int:
    steps = [
        int(marker.parent.name.removeprefix("step_"))
        for marker in (workdir / "checkpoints").glob("pretrain/*/step_*/COMPLETE")
    ]
    return max(steps, default=0)


def _start(args: list[str], log: Path) -> subprocess.Popen:
    """`lmforge run ARGS` leading its own group, as in a terminal; its output into `log` (a
    pipe could fill once the driver that reads Ray's output is dead)."""
    with log.open("w") as out:
        return subprocess.Popen(
            [*LMFORGE, "run", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_takes_ctrl_c,
        )


def _takes_ctrl_c() -> None:
    """SIGINT's default action, as a terminal's foreground process has it: a pytest started in
    the background (`cmd &` in a script) ignores SIGINT, and its children would inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _when_a_checkpoint_after(proc: subprocess.Popen, workdir: Path, step: int) -> None:
    """Return once a checkpoint newer than `step` is complete (within 10 minutes)."""
    deadline = time.time() + 600
    while _newest_step(workdir) <= step:
        assert proc.poll() is None, f"the run exited {proc.returncode} before"
        assert time.time() < deadline, f"no checkpoint after step {step} within 10 minutes"
        time.sleep(0.2)


RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
"""Ray's per-node agents, which outlive a SIGKILLed runtime by a minute: each sees its raylet die
at once, then waits out Ray's fixed 60 s timeout reporting that death to the dead GCS before it
exits. They hold nothing of the run's."""


def _session_alive(sid: int) -> list[int]:
    """The processes of session `sid` that still run, zombies and `RAY_AGENTS` left out (Ray's
    workers lead process groups of their own, in the driver's session)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").split()
        except (OSError, IndexError):
            continue
        agent = bool(command) and command[0].decode(errors="replace") in RAY_AGENTS
        if fields[0] != "Z" and int(fields[3]) == sid and not agent:
            alive.append(int(stat.parent.name))
    return alive


def _completed(proc: subprocess.Popen, log: Path) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text())


def _leftovers(workdir: Path) -> list[str]:
    """`LEFTOVERS` in the store and the checkpoints (MLflow's copies of artifacts may hold a
    directory named as a temporary one was)."""
    places = (workdir / "store", workdir / "checkpoints")
    return sorted(str(p) for root in places for pattern in LEFTOVERS for p in root.rglob(pattern))


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory) -> Interrupted:
    workdir = tmp_path_factory.mktemp("interrupted") / "runs"
    workdir.mkdir()
    # 40 documents: what is checked is where training resumes, not what it learns from
    args = [*ARGS, *small_corpus(workdir.parent), f"workdir={workdir}"]

    logs = workdir.parent
    proc = _start(args, logs / "ctrl-c.log")
    _when_a_checkpoint_after(proc, workdir, 0)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=180)
    ctrl_c = _completed(proc, logs / "ctrl-c.log")
    after_ctrl_c = status(workdir)
    ctrl_c_step = _newest_step(workdir)

    # Driver loss: SIGKILL to the driver alone, once it wrote a checkpoint of its own; its
    # local Ray runtime (the stage's process, Ray Train's workers) dies with it, but for
    # Ray's agents (`RAY_AGENTS`).
    proc = _start(args, logs / "killed.log")
    _when_a_checkpoint_after(proc, workdir, ctrl_c_step)
    proc.kill()
    proc.wait(timeout=60)
    deadline = time.time() + 120
    while _session_alive(proc.pid):
        assert time.time() < deadline, f"{_session_alive(proc.pid)} outlived their driver"
        time.sleep(0.2)
    killed = _completed(proc, logs / "killed.log")
    killed_step = _newest_step(workdir)
    killed_run = RecordBook(workdir / "pipeline_runs").latest().run_id
    left_after_kill = _leftovers(workdir)

    lmforge_here("run", *args)
    finished = status(workdir)
    artifact = workdir / "store" / "pretrain" / finished["pretrain"]["key"]
    resumed_losses = _losses(artifact)
    _check_the_hf_export_equals_the_model(artifact)

    # The uninterrupted reference: the same trajectory from step 0 once the checkpoints to
    # resume from are gone, on one worker (the same global batch and seed: the worker count
    # does not change the trajectory, but it changes the cache key), which spares a worker's
    # start and ZeRO-3's collectives at every step.
    shutil.rmtree(workdir / "checkpoints")
    lmforge_here("run", *args, "train.num_workers=1")
    reference = status(workdir)["pretrain"]
    return Interrupted(
        workdir=workdir,
        ctrl_c=ctrl_c,
        after_ctrl_c=after_ctrl_c,
        ctrl_c_step=ctrl_c_step,
        killed=killed,
        killed_step=killed_step,
        killed_run=killed_run,
        finished=finished,
        left_after_kill=left_after_kill,
        resumed_losses=resumed_losses,
        uninterrupted_losses=_losses(workdir / "store" / "pretrain" / reference["key"]),
        reference_key=reference["key"],
    )


def test_ctrl_c_during_pretrain_closes_its_runs_as_killed_and_keeps_the_finished_stages(
    interrupted,
):
    output = interrupted.ctrl_c.stdout
    assert interrupted.ctrl_c.returncode == 130, output
    assert "lmforge: interrupted" in output
    states = interrupted.after_ctrl_c
    assert states["pretrain"]["state"] == "killed"
    assert states["tokenize"]["state"] == "ran"
    mlflow = client(f"sqlite:///{interrupted.workdir / 'mlflow.db'}")
    killed = mlflow.get_run(states["pretrain"]["mlflow_run_id"])
    assert killed.info.status == "KILLED"
    parent = mlflow.get_run(killed.data.tags["mlflow.parentRunId"])
    assert parent.info.status == "KILLED", "the pipeline's parent run is closed as KILLED"


def test_each_next_run_resumes_from_the_latest_checkpoint_with_an_uninterrupted_runs_losses(
    interrupted,
):
    assert interrupted.ctrl_c_step >= 10
    # The SIGKILLed run continued from the Ctrl-C'd run's newest checkpoint and wrote newer ones.
    assert f"resumed from step {interrupted.ctrl_c_step} " in interrupted.killed.stdout
    assert interrupted.killed_step > interrupted.ctrl_c_step
    finished = interrupted.finished
    assert finished["tokenize"]["state"] == "cached" and finished["pretrain"]["state"] == "ran"
    trained = _summary(interrupted)
    assert trained["resumed_from_step"] == interrupted.killed_step
    assert trained["steps"] == 60
    assert interrupted.reference_key != finished["pretrain"]["key"]
    assert_same_losses(interrupted.resumed_losses, interrupted.uninterrupted_losses, rel=1e-3)


def test_nothing_of_a_sigkilled_driver_is_left_once_the_next_run_committed(interrupted):
    workdir = interrupted.workdir
    assert interrupted.killed.returncode == -signal.SIGKILL
    # What the dead run left (its leases at least) was there, and is gone now: the next run
    # took its leases over at once (their holder dead on this host) and released them, swept
    # its temporaries and its Ray Train storage, and pruned its unpublished checkpoints.
    left = interrupted.left_after_kill
    assert any(p.endswith(".lease.json") and "/checkpoints/" in p for p in left), left
    assert any(p.endswith(".lease.json") and "/store/pretrain/" in p for p in left), left
    assert any("/store/pretrain/.tmp-" in p for p in left), left
    assert _leftovers(workdir) == []
    assert not list((workdir / "ray_storage").iterdir()), "no run's Ray Train storage is left"
    book = RecordBook(workdir / "pipeline_runs")
    dead = book.load(interrupted.killed_run)
    assert dead.state == "killed" and dead.stage("pretrain").state == "killed"
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    assert mlflow.get_run(dead.mlflow_run_id).info.status == "KILLED"
    assert mlflow.get_run(dead.stage("pretrain").mlflow_run_id).info.status == "KILLED"


def _summary(interrupted: Interrupted) -> dict:
    artifact = Path(interrupted.finished["pretrain"]["artifact"])
    return json.loads((artifact / "manifest.json").read_text())["summary"]


def _check_the_hf_export_equals_the_model(artifact: Path) -> None:
    from transformers import AutoModelForCausalLM

    from lmforge.model.weights import load_model_dir

    ours = load_model_dir(artifact / "model").eval()
    hf = AutoModelForCausalLM.from_pretrained(artifact / "hf").eval()
    ids = torch.randint(
        0, ours.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        assert (ours(ids)[0] - hf(ids).logits).abs().max() < 1e-4


def _losses(artifact: Path) -> list[float]:
    """The per-step training losses of a pretrain artifact, 1..max_steps."""
    return json.loads((artifact / "training_summary.json").read_text())["losses"]
