"""A distributed run with `train.unlikelihood`: its losses stay cross-entropy, falling, and MLflow
gets the unlikelihood term at every logged step, from both workers' mean."""

from __future__ import annotations

import pytest
from fault.training_runs import train_config

pytestmark = pytest.mark.integration


def test_a_run_with_the_term_logs_it_beside_its_cross_entropy(runs, tmp_path):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("unlikelihood")).info.run_id
    cfg = train_config(max_steps=6, checkpoint_every=0, unlikelihood=0.5)
    summary = runs.train(
        "unlikelihood", cfg, tracking_uri=client.tracking_uri, mlflow_run_id=run_id
    )
    assert summary["steps"] == 6 and summary["final_loss"] < summary["initial_loss"]
    logged = {m.step: m.value for m in client.get_metric_history(run_id, "loss")}
    assert [logged[s] for s in sorted(logged)] == pytest.approx(summary["losses"], rel=1e-6)
    terms = client.get_metric_history(run_id, "unlikelihood")
    assert sorted(m.step for m in terms) == list(range(1, 7))
    assert all(0 < m.value < 10 for m in terms)
