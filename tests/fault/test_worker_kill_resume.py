"""A training worker SIGKILLed mid-run: Ray Train restarts the workers from the last checkpoint,
the run finishes, and every loss logged after the restart equals the uninterrupted run's."""

from __future__ import annotations

import pytest
from fault.training_runs import BASE, assert_same_losses, train_config

from lmforge.pipeline.training.fault import FaultInjection

pytestmark = pytest.mark.integration


def _mlflow_run(root):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.create_experiment("fault")
    return client, client.create_run(experiment).info.run_id


def test_a_killed_worker_is_restarted_from_the_last_checkpoint_and_the_run_finishes(
    runs, reference, tmp_path
):
    client, run_id = _mlflow_run(tmp_path)
    once = tmp_path / "killed"
    summary = runs.train(
        "killed",
        train_config(max_failures=1),
        fault=FaultInjection(kill_rank=1, kill_at_step=6, once_file=str(once)),
        tracking_uri=client.tracking_uri,
        mlflow_run_id=run_id,
    )
    assert once.read_text().startswith("pid"), "the worker did kill itself"
    assert summary["steps"] == BASE.max_steps
    assert summary["resumed_from_step"] == 4, "restarted from the checkpoint before the kill"
    assert_same_losses(summary["losses"], reference["losses"])

    history = client.get_metric_history(run_id, "loss")
    logged_after_restart = {}
    for metric in sorted(history, key=lambda m: m.timestamp):
        logged_after_restart[metric.step] = metric.value  # the restart logs steps 5-6 again
    assert len([m for m in history if m.step in (5, 6)]) == 4, "steps 5 and 6 ran twice"
    steps = sorted(s for s in logged_after_restart if s > 4)
    assert steps == list(range(5, BASE.max_steps + 1))
    assert_same_losses([logged_after_restart[s] for s in steps], reference["losses"][4:], rel=1e-3)
    for key in ("lr", "grad_norm", "tokens_per_s", "mfu"):
        assert client.get_metric_history(run_id, key), f"{key} is logged"
