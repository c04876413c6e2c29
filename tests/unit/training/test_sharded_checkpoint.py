"""Sharded checkpoints: each rank's shard holds ranges of the flattened tensors; any range reads
back from whichever shards hold it, a checkpoint counts once its marker is written, and a shard
that does not match the marker is found and named."""

from __future__ import annotations

import json

import pytest
import torch
from import_check import loaded_by_import
from safetensors import safe_open
from sharded_checkpoints import SHAPES, full_tensors, save_sharded, write_shard

from lmforge.pipeline.training.checkpoint import consolidated as ckpt
from lmforge.pipeline.training.checkpoint.resume import choose_checkpoint
from lmforge.pipeline.training.checkpoint.shard_format import LAYOUT_FILE, Layout, shard_names
from lmforge.pipeline.training.checkpoint.store import CheckpointStore
from lmforge.pipeline.training.zero3_init import normal_range


def _save(root, step: int, world: int) -> str:
    return save_sharded(CheckpointStore(str(root)), step, world)


def test_each_rank_writes_its_ranges_and_the_marker_lists_every_shard(tmp_path):
    path = _save(tmp_path, 4, world=3)
    listed = json.loads((tmp_path / "step_000004" / ckpt.MARKER).read_text())["files"]
    shards = {n for r in range(3) for n in shard_names(r, 3)}
    assert set(listed) == shards | {ckpt.STATE_FILE, LAYOUT_FILE}
    assert ckpt.verify_checkpoint(path) is None
    with safe_open(str(tmp_path / "step_000004" / shard_names(1, 3)[0]), "pt") as f:
        assert f.get_tensor("w").shape == (12,)  # rank 1 of 3 holds w's elements 12..23
        assert torch.equal(f.get_tensor("w"), full_tensors(4)["w"].reshape(-1)[12:24])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000004"]


@pytest.mark.parametrize(("start", "numel"), [(0, 35), (10, 5), (11, 13), (34, 1), (3, 30)])
def test_any_range_reads_back_from_the_shards_that_hold_it(tmp_path, start, numel):
    _save(tmp_path, 2, world=3)
    directory = tmp_path / "step_000002"
    layout = Layout.of(directory)
    assert layout.files_for({"w": (10, 2)}, optimizer=False) == {shard_names(0, 3)[0]}
    assert len(layout.files_for({"w": (11, 3)}, optimizer=True)) == 4  # crosses ranks 0 and 1
    read = layout.reader(directory)
    for key in ("w", "exp_avg_sq/w"):
        expected = full_tensors(2)[key].reshape(-1)[start : start + numel]
        assert torch.equal(read(key, start, numel), expected)


def test_a_consolidated_checkpoint_reads_through_the_same_layout(tmp_path):
    full = full_tensors(5)
    params = {n: full[n] for n in SHAPES}
    moments = {k: v for k, v in full.items() if "/" in k}
    path = ckpt.write_checkpoint(tmp_path, params, moments, _state_of(5))
    layout = Layout.of(path)
    assert layout.shapes == SHAPES
    read = layout.reader(path)
    assert torch.equal(read("w", 6, 20), full["w"].reshape(-1)[6:26])  # rows 0-3 of [5, 7]
    assert torch.equal(read("exp_avg/b", 0, 7), full["exp_avg/b"])


def test_a_corrupted_shard_is_skipped_with_a_warning_naming_it(tmp_path):
    _save(tmp_path, 4, world=2)
    newest = _save(tmp_path, 8, world=2)
    shard = tmp_path / "step_000008" / shard_names(1, 2)[1]
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF  # same size: only the sha256 in the marker tells
    shard.write_bytes(bytes(data))
    assert ckpt.verify_checkpoint(newest, hashes=False) is None
    everything = {name: (0, torch.Size(shape).numel()) for name, shape in SHAPES.items()}
    with pytest.warns(UserWarning, match=r"step_000008: corrupt: optimizer-00001-of-00002"):
        chosen = choose_checkpoint(str(tmp_path), 0, 1, everything)
    assert chosen.state.step == 4


def test_a_rank_fetches_and_checks_only_the_shards_holding_its_ranges(tmp_path, monkeypatch):
    _save(tmp_path, 4, world=2)
    hashed = []
    real = CheckpointStore.fetch

    def recording(self, location, names, rank):
        hashed.extend(names)
        return real(self, location, names, rank)

    monkeypatch.setattr(CheckpointStore, "fetch", recording)
    rank_1_of_2 = {"w": (18, 17), "b": (4, 3)}
    chosen = choose_checkpoint(str(tmp_path), 0, 1, rank_1_of_2)
    assert chosen.state.step == 4
    assert set(hashed) == {ckpt.STATE_FILE, LAYOUT_FILE, *shard_names(1, 2)}


def test_a_checkpoint_being_written_is_invisible_until_its_marker(tmp_path):
    _save(tmp_path, 4, world=2)
    store = CheckpointStore(str(tmp_path))
    pending = store.begin(8)
    full = full_tensors(8)
    write_shard(store, pending, 0, 2, full)
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == ["step_000004"]
    assert ckpt.latest_valid_checkpoint(tmp_path).name == "step_000004"


def _state_of(step: int) -> ckpt.TrainerState:
    return ckpt.TrainerState(
        step=step,
        adam_step=step,
        sampler_position=0,
        tokens_seen=0,
        seed=0,
        n_windows=1,
        world_size=1,
    )


@pytest.mark.parametrize(
    ("numel", "chunk"), [(1000, 48), (1003, 48), (1009, 16), (40, 64), (9, 16)]
)
def test_a_partition_drawn_in_chunks_has_the_numbers_of_one_normal_draw(numel, chunk):
    torch.manual_seed(3)
    whole = torch.empty(numel).normal_(0.0, 0.02)
    after_whole = torch.rand(3)
    for start, count in [(0, numel), (numel // 3, numel // 3), (numel - 5, 5)]:
        torch.manual_seed(3)
        part = normal_range(numel, 0.02, start, torch.empty(count), chunk)
        assert torch.equal(part, whole[start : start + count])
        assert torch.equal(torch.rand(3), after_whole), "the RNG moved on as for the whole draw"


def test_the_export_reads_checkpoints_without_importing_deepspeed():
    # The export runs in a Ray task of its own: importing DeepSpeed there (and the MLflow,
    # pandas and FastAPI modules its autotuner pulls in) cost about 1.4 s of every export.
    loaded = loaded_by_import("lmforge.pipeline.training.export", ["deepspeed", "torch"])
    assert loaded == {"deepspeed": False, "torch": True}
