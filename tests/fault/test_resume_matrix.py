"""The resume matrix: each way a training run stops, and how it continues, through the pretrain
stage's code path (Ray Train + DeepSpeed on CPU workers), on one local Ray session for all of
them. A continued run is checked against the uninterrupted one (`reference`: 2 workers, ZeRO-2,
the same global batch and seed) or its own uninterrupted twin: the same loss at every step.

- a worker SIGKILLed mid-run: Ray Train restarts the workers from the last checkpoint;
- a worker SIGKILLed writing its shard, then a shard of the checkpoint before corrupted: the
  next run continues from the newest checkpoint whose shards match its marker;
- a finished run on 2 workers under ZeRO-1 (the demo's layout) continues on 1 worker under
  ZeRO-3; that worker SIGKILLed, the run continues on 2 workers under ZeRO-1 again;
- the reference's checkpoints in a bucket, the newest without its marker: each rank fetches
  only its own shards of the one before;
- `train.compile` and `train.precision=bf16`, the GPU-only branches on CPU, on one worker in
  its task's process: a run whose max_steps is raised continues from the checkpoint the first
  one wrote;
- one worker in its task's own process (`train.local_mode`) trains the reference's trajectory,
  twice in one process.

Beside them, a run with the unlikelihood terms logs them to MLflow.
"""

from __future__ import annotations

import json
import os
import sys
import uuid

import pytest
import ray
from fault.training_runs import (
    BASE,
    MODEL,
    Runs,
    assert_same_losses,
    train_config,
    write_token_shards,
)

from lmforge.pipeline.cluster.ray_runtime import local_settings
from lmforge.pipeline.training.checkpoint.bucket import local_staging
from lmforge.pipeline.training.checkpoint.consolidated import MARKER, latest_valid_checkpoint
from lmforge.pipeline.training.checkpoint.shard_format import LAYOUT_FILE, shard_names
from lmforge.pipeline.training.fault import FaultInjection
from lmforge.pipeline.training.launch import PretrainingError

pytestmark = pytest.mark.integration
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # its Ray task, by value


@pytest.fixture(scope="module")
def bucket(s3_module) -> tuple[dict, object, str]:
    """The module's S3 server (moto on 127.0.0.1): its environment, a client, and a prefix of
    this session's own (the node-local staging of a bucket's checkpoints is keyed by their URI,
    and another session on this machine may run the same test)."""
    env, client = s3_module
    return env, client, f"s3://lmforge/{uuid.uuid4().hex[:12]}/checkpoints/pretrain"


@pytest.fixture(scope="module")
def ray_session(bucket):
    """A local runtime with the settings of the pipeline's (`ray_runtime.local_settings`: Ray
    Train asks no autoscaling coordinator and starts no preemption watcher, nor, without a
    dashboard to poll, a placement-group cleaner), whose workers and this process reach the
    bucket."""
    env, _, _ = bucket
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**local_settings(), **env}.items():
            patch.setenv(name, value)
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            runtime_env={"env_vars": env},
        )
        yield
        ray.shutdown()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ray_session) -> Runs:
    return Runs(
        tmp_path_factory.mktemp("runs"), write_token_shards(tmp_path_factory.mktemp("shards"))
    )


@pytest.fixture(scope="module")
def reference(runs, bucket) -> dict:
    """The uninterrupted run of BASE: 2 workers, ZeRO-2, 12 steps, a checkpoint every 4, which
    it writes to the bucket."""
    _, _, root = bucket
    return runs.train("reference", BASE, checkpoint_dir=f"{root}/reference")


def _layout(step_dir) -> tuple[int, int]:
    layout = json.loads((step_dir / LAYOUT_FILE).read_text())
    return layout["world_size"], layout["zero_stage"]


def _actors_of_class(name: str) -> set[str]:
    """Ids of the actors of class `name` this Ray session has had, dead ones included (the
    GCS's actor table: the state API needs the dashboard, which these tests leave out)."""
    from ray._private import state

    return {key for key, actor in state.actors().items() if actor["ActorClassName"] == name}


def test_a_killed_worker_is_restarted_from_the_last_checkpoint_and_the_run_finishes(
    runs, reference, tmp_path
):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("fault")).info.run_id
    once = tmp_path / "killed"
    summary = runs.train(
        "worker-killed",
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


def test_a_kill_mid_save_hides_the_partial_checkpoint_and_a_corrupt_shard_is_skipped(
    runs, reference, tmp_path
):
    checkpoints = tmp_path / "checkpoints"
    dies_writing = FaultInjection(
        kill_rank=1, kill_at_step=12, once_file=str(tmp_path / "killed"), during_save=True
    )
    with pytest.raises(PretrainingError, match="rerunning continues from the newest"):
        runs.train(
            "killed-mid-save",
            train_config(max_failures=0),
            checkpoint_dir=checkpoints,
            fault=dies_writing,
        )
    assert (tmp_path / "killed").is_file(), "rank 1 died writing its shard of step 12"
    visible = sorted(p.name for p in checkpoints.iterdir() if not p.name.startswith("."))
    assert visible == ["step_000004", "step_000008"], "the save that died is not visible"
    assert list(checkpoints.glob(".step_000012.tmp-*/" + shard_names(1, 2)[0])), "it was midway"
    assert latest_valid_checkpoint(checkpoints).name == "step_000008"

    shard = checkpoints / "step_000008" / shard_names(0, 2)[0]
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # same size: only the marker's sha256 tells
    shard.write_bytes(bytes(data))
    resumed = runs.train("past-a-corrupt-shard", train_config(), checkpoint_dir=checkpoints)
    assert resumed["resumed_from_step"] == 4, "step 8's corrupt shard was found: back to step 4"
    assert_same_losses(resumed["losses"], reference["losses"])
    assert not list(checkpoints.glob(".step_*")), "the dead save's leftovers are pruned"


def test_a_run_continues_on_another_number_of_workers_and_zero_stage_finished_or_killed(
    runs, reference, tmp_path
):
    # Each rank saves its own shard and a resume reshards for the new world size and ZeRO stage,
    # optimizer state included: the demo's ZeRO-1 (conf/deepspeed/zero1.json, gradients not
    # copied into a contiguous buffer) saved and restored, ZeRO-3 saved on 1 worker, restored.
    # None of the runs starts Ray Data's DatasetManager actor, nor (on this local runtime, as the
    # pipeline's) its autoscaling coordinator (`PipelineTrainer`).
    managers_before = _actors_of_class("DatasetManager")
    controllers_before = _actors_of_class("TrainController")
    checkpoints = tmp_path / "checkpoints"
    first = runs.train("zero1", train_config(max_steps=4, zero_stage=1), checkpoint_dir=checkpoints)
    assert first["steps"] == 4 and first["resumed_from_step"] is None
    assert _layout(checkpoints / "step_000004") == (2, 1)
    listed = json.loads((checkpoints / "step_000004" / MARKER).read_text())["files"]
    assert {*shard_names(0, 2), *shard_names(1, 2)} <= set(listed)

    killed = tmp_path / "killed"
    with pytest.raises(PretrainingError, match="rerunning continues from the newest"):
        runs.train(
            "one-worker-zero3",
            train_config(num_workers=1, zero_stage=3),
            checkpoint_dir=checkpoints,
            fault=FaultInjection(kill_rank=0, kill_at_step=10, once_file=str(killed)),
        )
    assert "killed at step 10" in killed.read_text()
    assert _layout(checkpoints / "step_000004") == (2, 1), "continued after step 4, not over"
    assert _layout(checkpoints / "step_000008") == (1, 3)
    assert latest_valid_checkpoint(checkpoints).name == "step_000008"

    resumed = runs.train("zero1-again", train_config(zero_stage=1), checkpoint_dir=checkpoints)
    assert resumed["resumed_from_step"] == 8 and resumed["world_size"] == 2
    assert _layout(checkpoints / "step_000012") == (2, 1)
    assert resumed["steps"] == BASE.max_steps
    assert resumed["tokens"] == BASE.max_steps * BASE.global_batch_size * MODEL.block_size
    assert_same_losses(resumed["losses"], reference["losses"])
    assert resumed["final_loss"] < resumed["initial_loss"]
    # The two workers hold this 2-CPU Ray node (`ray_session`), as the demo's hold the
    # machine's: each rank's training thread keeps to its own CPU (`cpu_pinning`).
    assert len(os.sched_getaffinity(0)) >= 2
    cpus = resumed["training_thread_cpus"]
    assert [len(share) for share in cpus] == [1, 1] and cpus[0] != cpus[1]
    # Both workers started with glibc's tunables and keep the memory their steps free.
    assert resumed["freed_memory_kept"] == [True, True]
    assert len(_actors_of_class("TrainController") - controllers_before) >= 3  # Ray Train ran them
    assert _actors_of_class("DatasetManager") == managers_before
    assert not _actors_of_class("_AutoscalingCoordinatorActor")


def test_two_ranks_on_one_node_resume_from_the_bucket(runs, reference, bucket):
    # Each rank uploaded its own shards; on resume each downloads only its own into a staging
    # directory of its own, and removes them once loaded.
    _, client, root = bucket
    uri = f"{root}/reference"
    assert reference["checkpoint_path"] == f"{uri}/step_000012"
    prefix = f"{uri.removeprefix('s3://lmforge/')}/step_000008/"
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="lmforge", Prefix=prefix)["Contents"]}
    assert {prefix + name for r in (0, 1) for name in shard_names(r, 2)} <= keys

    # As if the save of step 12 had died before its marker: the next run resumes from step 8.
    client.delete_object(Bucket="lmforge", Key=prefix.replace("08/", "12/") + MARKER)
    resumed = runs.train("bucket-resumed", BASE, checkpoint_dir=uri)
    assert resumed["resumed_from_step"] == 8 and resumed["world_size"] == 2
    assert_same_losses(resumed["losses"], reference["losses"])
    assert not list(local_staging(uri).glob("rank-*")), "each rank removed its own downloads"


def test_one_worker_in_local_mode_trains_the_reference_twice_in_one_process(runs, reference):
    # Ray Train's local mode: no controller, synchronisation actor or worker actor; the second
    # run in the same task process uses the group of one the first set up (DeepSpeed keeps it).
    controllers_before = _actors_of_class("TrainController")
    local = train_config(num_workers=1, local_mode=True)

    @ray.remote(num_cpus=1)
    def twice() -> tuple[dict, dict, int, list[int]]:
        import torch

        threads = [torch.get_num_threads()]
        first = runs.train("local-first", local)
        threads.append(torch.get_num_threads())
        second = runs.train("local-second", local)
        threads.append(torch.get_num_threads())
        return first, second, os.getpid(), threads

    first, second, pid, threads = ray.get(twice.remote())
    for summary in (first, second):
        assert summary["world_size"] == 1 and summary["resumed_from_step"] is None
        assert_same_losses(summary["losses"], reference["losses"])
    assert first["losses"] == second["losses"]
    assert pid != os.getpid()  # trained in the task's process
    assert threads[1:] == threads[:1] * 2, "torch's thread count put back after each run"
    assert _actors_of_class("TrainController") == controllers_before


def test_compile_and_bf16_train_on_cpu_and_their_checkpoint_resumes(runs, tmp_path):
    # The GPU-only branches on CPU: `train.compile=true` (torch.compile through DeepSpeed's
    # `engine.compile()`) and `train.precision=bf16` (autocast); the loss falls, and a run whose
    # max_steps is raised continues from the checkpoint the first run wrote. One worker, in its
    # task's own process (`train.local_mode`): the branches are the worker's, whoever starts it,
    # and the second run reuses the first one's imports of the compiler.
    options = {"compile": True, "precision": "bf16", "num_workers": 1, "local_mode": True}
    checkpoints = tmp_path / "checkpoints"

    @ray.remote(num_cpus=1)
    def first_then_more() -> tuple[dict, dict]:
        first = runs.train(
            "compiled", train_config(max_steps=6, **options), checkpoint_dir=checkpoints
        )
        more = train_config(max_steps=10, **options)
        return first, runs.train("compiled-more", more, checkpoint_dir=checkpoints)

    first, resumed = ray.get(first_then_more.remote())
    assert first["steps"] == 6 and first["resumed_from_step"] is None
    assert first["final_loss"] < first["initial_loss"]
    assert resumed["resumed_from_step"] == 6 and resumed["steps"] == 10
    losses = resumed["losses"]
    assert losses[:6] == first["losses"]  # the history comes from the checkpoint
    assert max(losses[6:]) < losses[0]  # the continued steps start from trained weights
    assert losses[-1] < losses[0]


def test_a_run_with_the_unlikelihood_terms_logs_them_beside_its_cross_entropy(runs, tmp_path):
    # Its losses stay cross-entropy, falling, and MLflow gets the unlikelihood term at every
    # logged step, from both workers' mean; with the sequence-level term on every other one of
    # its last 4 steps, MLflow gets that term and the looping share at those steps alone.
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
