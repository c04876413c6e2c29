"""Pretraining across two Ray nodes: a head and a second node on this machine, one ZeRO-3 worker
on each; both nodes host a worker and the loss falls."""

from __future__ import annotations

import pytest
import ray
from fault.training_runs import MODEL, train_config, write_token_shards
from ray.cluster_utils import Cluster

from lmforge.pipeline.training.driver import run_pretraining

pytestmark = pytest.mark.integration


@pytest.fixture
def two_node_cluster():
    """A head node and a second node, 1 CPU each, as separate raylets; the test driver connects.

    The nodes use the machine's address: Ray rewrites a loopback address to it when a driver
    connects, so a cluster bound to 127.0.0.1 is unreachable through `ray.init(address=...)`.
    """
    node = {"num_cpus": 1, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=node)
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_pretraining_runs_one_zero3_worker_on_each_of_two_nodes(two_node_cluster, tmp_path):
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(alive) == 2
    data = write_token_shards(tmp_path / "shards")
    cfg = train_config(
        max_steps=10,
        zero_stage=3,
        num_workers=2,
        placement_strategy="STRICT_SPREAD",
        checkpoint_every=5,
    )
    summary = run_pretraining(
        model_cfg=MODEL,
        train_cfg=cfg,
        data_dir=str(data),
        out_dir=str(tmp_path / "model"),
        checkpoint_dir=str(tmp_path / "checkpoints"),
        storage_path=str(tmp_path / "ray_storage"),
    )
    assert summary["world_size"] == 2
    assert set(summary["worker_nodes"]) == alive, "each node hosted one worker"
    assert summary["final_loss"] < summary["initial_loss"] - 0.1
    assert (tmp_path / "model" / "model.safetensors").is_file()
