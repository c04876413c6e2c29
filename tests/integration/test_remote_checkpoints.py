"""Training checkpoints in a bucket of a real S3-compatible server (moto) on 127.0.0.1: the marker
is published last, pruning keeps the newest, and a dead upload or a corrupted file is skipped."""

from __future__ import annotations

import shutil

import pytest
import torch

from lmforge.pipeline.storage.bucket_files import BucketFiles
from lmforge.pipeline.training.checkpoint import bucket as remote
from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.store import CheckpointStore

pytestmark = pytest.mark.integration

ROOT = "s3://lmforge/checkpoints/pretrain/abc"


@pytest.fixture
def bucket(s3_in_env):
    yield s3_in_env
    shutil.rmtree(remote.local_staging(ROOT), ignore_errors=True)


def _state(step: int) -> ckpt.TrainerState:
    return ckpt.TrainerState(
        step=step,
        adam_step=step,
        sampler_position=step * 4,
        tokens_seen=step * 64,
        seed=0,
        n_windows=100,
        world_size=1,
        losses=[1.0] * step,
    )


def _save(step: int, keep: int = 2) -> tuple[dict, str]:
    params = {"w": torch.full((3, 2), float(step))}
    moments = {"exp_avg/w": torch.zeros(3, 2), "exp_avg_sq/w": torch.ones(3, 2)}
    _, location = remote.save(ROOT, params, moments, _state(step), keep)
    return params, location


def _keys(client) -> set[str]:
    return {o["Key"] for o in client.list_objects_v2(Bucket="lmforge").get("Contents", [])}


def test_checkpoints_go_to_the_bucket_and_only_the_newest_are_kept(bucket):
    for step in (10, 20, 30):
        params, location = _save(step)
    assert location == f"{ROOT}/step_000030"
    steps = {key.split("/")[3] for key in _keys(bucket) if not key.endswith("/")}
    assert steps == {"step_000020", "step_000030"}
    assert [name for _, name, _ in CheckpointStore(ROOT).steps()] == [
        "step_000030",
        "step_000020",
    ]
    assert [p.name for p in remote.local_staging(ROOT).iterdir()] == ["step_000030"]

    assert remote.latest(ROOT) == location
    shutil.rmtree(remote.local_staging(ROOT))  # another node: nothing local
    loaded = remote.load(location)
    assert torch.equal(loaded.params["w"], params["w"])
    assert loaded.state.step == 30 and loaded.state.sampler_position == 120


def test_an_upload_without_its_marker_is_skipped(bucket):
    _save(10)
    key = "checkpoints/pretrain/abc/step_000020/model.safetensors"
    bucket.put_object(Bucket="lmforge", Key=key, Body=b"an upload that died")
    with pytest.warns(UserWarning, match="step_000020: incomplete"):
        assert remote.latest(ROOT) == f"{ROOT}/step_000010"


def test_a_corrupted_file_is_skipped_and_refused(bucket):
    _save(10)
    _, newest = _save(20)
    key = "checkpoints/pretrain/abc/step_000020/model.safetensors"
    bucket.put_object(Bucket="lmforge", Key=key, Body=b"not the tensors the marker lists")
    with pytest.warns(UserWarning, match="step_000020: corrupt"):
        assert remote.latest(ROOT) == f"{ROOT}/step_000010"
    with pytest.raises(ckpt.CheckpointError, match="step_000020 is not usable"):
        remote.load(newest)


def test_rewriting_a_step_replaces_it(bucket):
    _save(10)
    params = {"w": torch.full((3, 2), 7.0)}
    moments = {"exp_avg/w": torch.zeros(3, 2), "exp_avg_sq/w": torch.ones(3, 2)}
    _, location = remote.save(ROOT, params, moments, _state(10), keep=2)
    shutil.rmtree(remote.local_staging(ROOT))
    assert torch.equal(remote.load(location).params["w"], params["w"])


def test_a_copy_another_run_left_on_this_node_does_not_disturb_saving(bucket):
    stale = remote.local_staging(ROOT)
    moments = {"exp_avg/w": torch.zeros(3, 2), "exp_avg_sq/w": torch.ones(3, 2)}
    ckpt.write_checkpoint(stale, {"w": torch.zeros(3, 2)}, moments, _state(99))
    path, location = remote.save(ROOT, {"w": torch.ones(3, 2)}, moments, _state(10), keep=2)
    assert path.is_dir() and ckpt.verify_checkpoint(path) is None  # still there to report
    assert [p.name for p in stale.iterdir()] == ["step_000010"]
    assert remote.latest(ROOT) == location


class _RefusedWrites:
    """The bucket's filesystem, refusing writes to paths ending in `refused`."""

    def __init__(self, fs, refused: str) -> None:
        self._fs, self._refused = fs, refused

    def open_output_stream(self, path: str, *args, **kwargs):
        if path.endswith(self._refused):
            raise OSError(f"When uploading {path}: the bucket refused the write")
        return self._fs.open_output_stream(path, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._fs, name)


def test_a_rewrite_that_dies_midway_leaves_a_complete_copy_of_the_step(bucket, monkeypatch):
    _save(10, keep=1)
    real_init = BucketFiles.__init__

    def refusing_the_rewritten_weights(self, uri):
        real_init(self, uri)
        self.fs = _RefusedWrites(self.fs, "/step_000010/model.safetensors")

    with monkeypatch.context() as patch, pytest.raises(OSError, match="refused"):
        patch.setattr(BucketFiles, "__init__", refusing_the_rewritten_weights)
        _save(10, keep=1)
    shutil.rmtree(remote.local_staging(ROOT))  # another node: nothing local
    with pytest.warns(UserWarning, match="step_000010: incomplete"):
        location = remote.latest(ROOT)
    assert location is not None, "no checkpoint left to resume from"
    loaded = remote.load(location)
    assert loaded.state.step == 10 and torch.equal(loaded.params["w"], torch.full((3, 2), 10.0))

    _save(10, keep=1)  # the next attempt completes the rewrite; the swap copy goes
    steps = {key.split("/")[3] for key in _keys(bucket) if not key.endswith("/")}
    assert steps == {"step_000010"}
    assert remote.latest(ROOT) == f"{ROOT}/step_000010"


def test_pruning_never_counts_a_truncated_checkpoint_among_those_it_keeps(bucket):
    _save(10)
    _save(20)
    key = "checkpoints/pretrain/abc/step_000020/model.safetensors"
    body = bucket.get_object(Bucket="lmforge", Key=key)["Body"].read()
    bucket.put_object(Bucket="lmforge", Key=key, Body=body[:-10])
    assert CheckpointStore(ROOT).prune(keep=1) == []
    steps = {key.split("/")[3] for key in _keys(bucket) if not key.endswith("/")}
    assert steps == {"step_000010", "step_000020"}
    with pytest.warns(UserWarning, match="step_000020: corrupt"):
        assert remote.latest(ROOT) == f"{ROOT}/step_000010"
