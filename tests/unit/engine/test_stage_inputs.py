"""`ctx.input()` is typed as what it returns: a `pathlib.Path` (a local store) and an
`InputPath` (a bucket) are both `ArtifactPath`s, and a stage uses only what they share."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from lmforge.pipeline.engine.stage import StageContext
from lmforge.pipeline.storage.input_artifact import ArtifactPath, InputPath, RemoteArtifact
from lmforge.pipeline.storage.node_cache import CacheConfig

MANIFEST = {"files": [{"path": "shards/train-00000.parquet", "bytes": 3, "sha256": "0" * 64}]}


def _bucket_input(tmp_path: Path) -> InputPath:
    cache = CacheConfig(str(tmp_path / "cache"), 1 << 20)
    artifact = RemoteArtifact(
        "s3://b/store/clean/k", "s3://b/store/clean/k/a1", "clean", "k", MANIFEST, cache
    )
    return InputPath(artifact)


def _context(tmp_path: Path, inputs: dict) -> StageContext:
    return StageContext(
        stage="tokenize",
        config=None,
        inputs=inputs,
        input_manifests={},
        out_dir=tmp_path,
        tracker=None,
        workdir=tmp_path,
        key="k",
    )


def test_an_input_is_typed_as_the_one_type_both_stores_give():
    names = {"ArtifactPath": ArtifactPath}  # imported for type checkers only
    assert typing.get_type_hints(StageContext.input, localns=names)["return"] is ArtifactPath
    assert StageContext.__annotations__["inputs"] == "dict[str, ArtifactPath]"


def test_a_local_directory_and_a_bucket_input_are_both_artifact_paths(tmp_path):
    local, remote = tmp_path, _bucket_input(tmp_path)
    for path in (local, remote):
        assert isinstance(path, ArtifactPath)
        assert isinstance(path / "shards", ArtifactPath)
    assert [p.name for p in (remote / "shards").iterdir()] == ["train-00000.parquet"]
    assert (remote / "shards" / "train-00000.parquet").stat().st_size == 3


def test_a_stage_gets_its_declared_inputs_only(tmp_path):
    remote = _bucket_input(tmp_path)
    ctx = _context(tmp_path, {"clean": remote, "train_tokenizer": tmp_path})
    assert ctx.input("clean") is remote and ctx.input("train_tokenizer") == tmp_path
    with pytest.raises(KeyError, match="did not declare input 'pretrain'"):
        ctx.input("pretrain")
