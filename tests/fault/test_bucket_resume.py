"""Two workers on one node resume from checkpoints in a bucket of a real S3-compatible server
(moto on 127.0.0.1): each uploads its own shards, and on resume each downloads only its own into
a staging directory of its own; the run continues with the losses of the uninterrupted one."""

from __future__ import annotations

import pytest
import ray
from fault.training_runs import Runs, assert_same_losses, train_config

from lmforge.pipeline.training.checkpoint.bucket import local_staging
from lmforge.pipeline.training.checkpoint.shard_format import shard_names

pytestmark = pytest.mark.integration

URI = "s3://lmforge/checkpoints/pretrain/two-ranks"


@pytest.fixture
def ray_with_bucket(s3, monkeypatch):
    """A local Ray whose workers reach the bucket (its address and keys in their environment)."""
    env, client = s3
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ray.init(address="local", num_cpus=2, include_dashboard=False, runtime_env={"env_vars": env})
    yield client
    ray.shutdown()


def test_two_ranks_on_one_node_resume_from_the_bucket(ray_with_bucket, token_shards, tmp_path):
    client, runs = ray_with_bucket, Runs(tmp_path, token_shards)
    cfg = train_config(max_steps=8, zero_stage=3)
    uninterrupted = runs.train("first", cfg, checkpoint_dir=URI)
    assert uninterrupted["checkpoint_path"] == f"{URI}/step_000008"
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="lmforge")["Contents"]}
    prefix = "checkpoints/pretrain/two-ranks/step_000004/"
    assert {prefix + name for r in (0, 1) for name in shard_names(r, 2)} <= keys

    # As if the save of step 8 had died before its marker: the next run resumes from step 4.
    client.delete_object(Bucket="lmforge", Key=prefix.replace("04/", "08/") + "COMPLETE")
    resumed = runs.train("resumed", cfg, checkpoint_dir=URI)
    assert resumed["resumed_from_step"] == 4 and resumed["world_size"] == 2
    assert_same_losses(resumed["losses"], uninterrupted["losses"])
    assert not list(local_staging(URI).glob("rank-*")), "each rank removed its own downloads"
