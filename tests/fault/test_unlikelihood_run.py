"""A distributed run with `train.unlikelihood`: its losses stay cross-entropy, falling, and MLflow
gets the unlikelihood term at every logged step, from both workers' mean; with the
sequence-level term on every other one of its last 4 steps as well, MLflow gets that term and the
looping share at those steps alone."""

from __future__ import annotations

import pytest
from fault.training_runs import train_config

pytestmark = pytest.mark.integration


def test_a_run_with_the_term_logs_it_beside_its_cross_entropy(runs, tmp_path):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("unlikelihood")).info.run_id
    cfg = train_config(
        max_steps=6,
        checkpoint_every=0,
        unlikelihood=0.5,
        sequence_unlikelihood=1.0,
        sequence_unlikelihood_steps=4,
        sequence_unlikelihood_every=2,
        sequence_unlikelihood_tokens=8,
    )
    summary = runs.train(
        "unlikelihood", cfg, tracking_uri=client.tracking_uri, mlflow_run_id=run_id
    )
    assert summary["steps"] == 6 and summary["final_loss"] < summary["initial_loss"]
    logged = {m.step: m.value for m in client.get_metric_history(run_id, "loss")}
    assert [logged[s] for s in sorted(logged)] == pytest.approx(summary["losses"], rel=1e-6)
    terms = client.get_metric_history(run_id, "unlikelihood")
    assert sorted(m.step for m in terms) == list(range(1, 7))
    assert all(0 < m.value < 10 for m in terms)
    # 0-based steps 2 and 4 of the last 4 carry the sequence-level term: logged as steps 3 and 5
    for name in ("sequence_unlikelihood", "looping_share"):
        history = client.get_metric_history(run_id, name)
        assert sorted(m.step for m in history) == [3, 5], name
        assert all(0 <= m.value < 10 for m in history)
