"""Pretraining across two Ray nodes: a head and a second node on this machine, one ZeRO-3 worker
on each; both nodes host a worker, and every step's loss equals that of a one-node run of the same
config (same global batch and seed) on one worker, within rel 1e-3 (gloo across nodes reduces in
another order than one worker accumulating: measured 6e-8 at most)."""

from __future__ import annotations

import pytest
import ray
from fault.training_runs import (
    MODEL,
    assert_same_losses,
    sample_index_for,
    train_config,
    write_token_shards,
)
from ray.cluster_utils import Cluster

from lmforge.pipeline.cluster.ray_runtime import local_settings
from lmforge.pipeline.training.launch import run_pretraining

pytestmark = pytest.mark.integration


@pytest.fixture
def two_node_cluster(monkeypatch):
    """A head node and a second node, 1 CPU each, as separate raylets; the test driver connects.

    The nodes use the machine's address: Ray rewrites a loopback address to it when a driver
    connects, so a cluster bound to 127.0.0.1 is unreachable through `ray.init(address=...)`.
    They have the settings of the pipeline's local runtime (no dashboard, nor the Ray Train
    helpers that only a cluster that grows, shrinks or drains needs).
    """
    for name, value in local_settings().items():
        monkeypatch.setenv(name, value)
    node = {"num_cpus": 1, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=node)
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_one_zero3_worker_on_each_of_two_nodes_trains_like_one_node(two_node_cluster, tmp_path):
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(alive) == 2
    data = write_token_shards(tmp_path / "shards")
    overrides = {"max_steps": 10, "zero_stage": 3, "checkpoint_every": 5}
    cfg = train_config(**overrides, num_workers=2, placement_strategy="STRICT_SPREAD")
    two_nodes = _train(tmp_path / "two_nodes", data, cfg)
    assert two_nodes["world_size"] == 2
    assert set(two_nodes["worker_nodes"]) == alive, "each node hosted one worker"
    assert two_nodes["final_loss"] < two_nodes["initial_loss"] - 0.1
    assert (tmp_path / "two_nodes" / "model" / "model.safetensors").is_file()

    one_node = _train(tmp_path / "one_node", data, train_config(**overrides, num_workers=1))
    assert one_node["world_size"] == 1 and len(set(one_node["worker_nodes"])) == 1
    assert_same_losses(two_nodes["losses"], one_node["losses"], rel=1e-3)


def _train(root, data, cfg) -> dict:
    return run_pretraining(
        model_cfg=MODEL,
        train_cfg=cfg,
        data_dir=str(data),
        sample_index_dir=str(sample_index_for(root / "index", data, cfg)),
        out_dir=str(root / "model"),
        checkpoint_dir=str(root / "checkpoints"),
        storage_path=str(root / "ray_storage"),
    )
