"""One rule tells a bucket from a local path, and `file://` is a local path for artifacts and
checkpoints alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lmforge.pipeline.engine.stage import StageContext
from lmforge.pipeline.storage.artifact_store import ArtifactStore, open_store
from lmforge.pipeline.storage.location import is_bucket, join, local_path
from lmforge.pipeline.training.checkpoint import bucket as checkpoints
from lmforge.pipeline.training.checkpoint import consolidated as ckpt


@pytest.mark.parametrize(
    "location",
    ["s3://bucket/store", "gs://bucket", "hdfs://namenode/store", "s3://b"],
)
def test_a_location_with_a_scheme_is_a_bucket(location):
    assert is_bucket(location)
    with pytest.raises(ValueError, match="is a bucket"):
        local_path(location)


@pytest.mark.parametrize(
    "location", ["/data/store", "runs/store", "~/store", "file:///data/store", Path("/x"), None]
)
def test_a_path_or_a_file_uri_is_local(location):
    assert not is_bucket(location)


def test_a_file_uri_names_the_path_after_its_scheme():
    assert local_path("file:///data/store") == Path("/data/store")
    assert local_path("~/store") == Path.home() / "store"
    assert join("file:///data", "checkpoints", "k") == "/data/checkpoints/k"
    assert join("s3://bucket/store/", "checkpoints", "k") == "s3://bucket/store/checkpoints/k"


def test_an_artifact_store_at_a_file_uri_is_the_local_store_at_that_path(tmp_path):
    store = open_store(f"file://{tmp_path}/store", tmp_path / "workdir")
    assert isinstance(store, ArtifactStore) and store.root == tmp_path / "store"
    tmp = store.begin("clean", "abc")
    (tmp / "a.txt").write_text("hello")
    store.commit(tmp, "clean", "abc", {"summary": {}})
    assert ArtifactStore(tmp_path / "store").verify("clean", "abc", full=True) is None


def test_checkpoints_at_a_file_uri_are_the_local_checkpoints_at_that_path(tmp_path):
    root = f"file://{tmp_path}/checkpoints"
    state = ckpt.TrainerState(
        step=3, adam_step=3, sampler_position=0, tokens_seen=0, seed=0, n_windows=1, world_size=1
    )
    path, location = checkpoints.save(root, {"w": torch.ones(2)}, {}, state, keep=1)
    assert path == tmp_path / "checkpoints" / "step_000003" and location == str(path)
    assert checkpoints.latest(root) == str(path)
    assert torch.equal(checkpoints.load(f"file://{path}").params["w"], torch.ones(2))


def _context(tmp_path: Path, store_uri: str | None) -> StageContext:
    return StageContext(
        stage="pretrain",
        config=None,
        inputs={},
        input_manifests={},
        out_dir=tmp_path / "out",
        tracker=None,
        workdir=tmp_path,
        key="k",
        store_uri=store_uri,
    )


def test_data_kept_outside_artifacts_goes_to_the_bucket_only_when_the_store_is_one(tmp_path):
    shared = _context(tmp_path, "s3://bucket/store").shared_location("checkpoints", "k")
    assert shared == "s3://bucket/store/checkpoints/k"
    for local in (None, f"file://{tmp_path}/store", str(tmp_path / "store")):
        where = _context(tmp_path, local).shared_location("checkpoints", "k")
        assert where == str(tmp_path / "checkpoints" / "k")
