"""Checkpoints count only when complete and intact; a broken one is skipped loudly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from lmforge.pipeline.storage import digests
from lmforge.pipeline.training.checkpoint import consolidated as ckpt


def _state(step: int) -> ckpt.TrainerState:
    return ckpt.TrainerState(
        step=step,
        adam_step=step,
        sampler_position=8 * step,
        tokens_seen=256 * step,
        seed=1,
        n_windows=100,
        world_size=2,
        losses=[4.0 - 0.1 * i for i in range(step)],
        model_config={"d_model": 8},
    )


def _weights(step: int) -> torch.Tensor:
    return torch.full((3, 4), float(step))


def _write(root, step: int):
    params = {"w": _weights(step), "b": torch.arange(4.0)}
    moments = {
        "exp_avg/w": torch.ones(3, 4),
        "exp_avg_sq/w": torch.ones(3, 4) * 2,
        "exp_avg/b": torch.zeros(4),
        "exp_avg_sq/b": torch.zeros(4),
    }
    return ckpt.write_checkpoint(root, params, moments, _state(step))


def test_a_written_checkpoint_loads_back_exactly(tmp_path):
    path = _write(tmp_path, 7)
    assert path.name == "step_000007"
    loaded = ckpt.load_checkpoint(path)
    assert torch.equal(loaded.params["w"], torch.full((3, 4), 7.0))
    assert torch.equal(loaded.moments["exp_avg_sq/w"], torch.ones(3, 4) * 2)
    assert loaded.state == _state(7)
    assert ckpt.latest_valid_checkpoint(tmp_path) == path


def test_the_marker_is_the_last_file_and_nothing_temporary_is_left(tmp_path):
    path = _write(tmp_path, 3)
    names = {p.name for p in path.iterdir()}
    assert names == {ckpt.MARKER, ckpt.MODEL_FILE, ckpt.OPTIMIZER_FILE, ckpt.STATE_FILE}
    marker = json.loads((path / ckpt.MARKER).read_text())
    assert set(marker["files"]) == names - {ckpt.MARKER}
    assert [p.name for p in tmp_path.iterdir()] == ["step_000003"]


def test_a_write_that_fails_midway_leaves_no_checkpoint_behind(tmp_path, monkeypatch):
    _write(tmp_path, 1)
    real_save = ckpt.save_file

    def disk_full_on_the_optimizer_file(tensors, filename, *args, **kwargs):
        if filename.endswith(ckpt.OPTIMIZER_FILE):
            with open(filename, "wb") as f:
                f.write(b"partial")
            raise OSError(28, "No space left on device")
        return real_save(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(ckpt, "save_file", disk_full_on_the_optimizer_file)
    with pytest.raises(OSError, match="No space"):
        _write(tmp_path, 2)
    assert [p.name for p in tmp_path.iterdir()] == ["step_000001"]
    assert ckpt.latest_valid_checkpoint(tmp_path).name == "step_000001"


def test_a_checkpoint_without_its_marker_is_skipped_for_the_previous_one(tmp_path):
    good = _write(tmp_path, 2)
    newer = _write(tmp_path, 4)
    (newer / ckpt.MARKER).unlink()
    with pytest.warns(UserWarning, match=r"step_000004.*incomplete"):
        assert ckpt.latest_valid_checkpoint(tmp_path) == good


def test_a_truncated_checkpoint_is_skipped_with_a_warning_naming_it(tmp_path):
    good = _write(tmp_path, 2)
    newer = _write(tmp_path, 4)
    weights = newer / ckpt.MODEL_FILE
    weights.write_bytes(weights.read_bytes()[:-10])
    with pytest.warns(UserWarning, match=r"step_000004.*model.safetensors has \d+ bytes"):
        assert ckpt.latest_valid_checkpoint(tmp_path) == good


def test_a_corrupted_byte_is_detected_even_when_the_size_is_unchanged(tmp_path):
    good = _write(tmp_path, 2)
    newer = _write(tmp_path, 4)
    moments = newer / ckpt.OPTIMIZER_FILE
    data = bytearray(moments.read_bytes())
    data[-1] ^= 0xFF
    moments.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=r"step_000004.*optimizer.safetensors.*sha256"):
        assert ckpt.latest_valid_checkpoint(tmp_path) == good


def test_no_valid_checkpoint_means_a_fresh_start(tmp_path):
    assert ckpt.latest_valid_checkpoint(tmp_path / "missing") is None
    only = _write(tmp_path, 1)
    (only / ckpt.STATE_FILE).unlink()
    with pytest.warns(UserWarning, match="trainer_state.json is missing"):
        assert ckpt.latest_valid_checkpoint(tmp_path) is None


def test_a_complete_checkpoint_that_cannot_be_loaded_is_an_error_not_a_fresh_start(tmp_path):
    path = _write(tmp_path, 5)
    (path / ckpt.MODEL_FILE).write_bytes(b"these bytes are not a safetensors file")
    (path / ckpt.MARKER).unlink()
    ckpt._write_marker(path)  # the marker now vouches for the broken file
    assert ckpt.latest_valid_checkpoint(tmp_path) == path
    with pytest.raises(ckpt.CheckpointError, match=r"step_000005.*marked complete"):
        ckpt.load_checkpoint(path)


def test_loading_an_unverified_checkpoint_is_refused(tmp_path):
    path = _write(tmp_path, 5)
    (path / ckpt.MARKER).unlink()
    with pytest.raises(ckpt.CheckpointError, match="incomplete"):
        ckpt.load_checkpoint(path)


def test_rewriting_a_step_replaces_it(tmp_path):
    _write(tmp_path, 3)
    params = {"w": torch.zeros(2)}
    ckpt.write_checkpoint(tmp_path, params, {}, _state(3))
    assert torch.equal(ckpt.load_checkpoint(tmp_path / "step_000003").params["w"], torch.zeros(2))
    assert [p.name for p in tmp_path.iterdir()] == ["step_000003"]


def test_pruning_keeps_the_newest_valid_checkpoints_and_clears_dead_writes(tmp_path):
    for step in (1, 2, 3, 4):
        _write(tmp_path, step)
    (tmp_path / ".step_000005.tmp-0123abcd").mkdir()  # a writer that died
    removed = ckpt.prune_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == ["step_000001", "step_000002"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000003", "step_000004"]


def test_a_rewrite_that_fails_mid_swap_leaves_the_old_copy_in_place(tmp_path, monkeypatch):
    _write(tmp_path, 2)
    _write(tmp_path, 3)
    real_replace = os.replace

    def refuse_moving_the_new_copy_in(source, target):
        if Path(source).name.startswith(".step_000003.tmp-"):
            raise OSError(5, "Input/output error")
        return real_replace(source, target)

    with monkeypatch.context() as patch, pytest.raises(OSError, match="Input/output"):
        patch.setattr(os, "replace", refuse_moving_the_new_copy_in)
        ckpt.write_checkpoint(tmp_path, {"w": torch.zeros(2)}, {}, _state(3))
    assert ckpt.latest_valid_checkpoint(tmp_path).name == "step_000003"
    assert torch.equal(ckpt.load_checkpoint(tmp_path / "step_000003").params["w"], _weights(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000002", "step_000003"]


def test_a_writer_that_died_mid_swap_leaves_a_copy_that_resuming_finds(tmp_path):
    old = _write(tmp_path, 3)
    aside = old.rename(tmp_path / ".step_000003.swap-0123abcd")  # the old copy, set aside
    (tmp_path / ".step_000003.tmp-89abcdef").mkdir()  # the new copy, not yet moved in
    assert ckpt.latest_valid_checkpoint(tmp_path) == aside
    assert ckpt.load_checkpoint(aside).state == _state(3)

    _write(tmp_path, 4)
    ckpt.prune_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".step_000003.swap-0123abcd",
        "step_000004",
    ]
    _write(tmp_path, 3)
    ckpt.prune_checkpoints(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000003", "step_000004"]


def test_pruning_never_counts_a_truncated_checkpoint_among_those_it_keeps(tmp_path):
    for step in (1, 2, 3):
        _write(tmp_path, step)
    weights = tmp_path / "step_000003" / ckpt.MODEL_FILE
    weights.write_bytes(weights.read_bytes()[:-10])
    removed = ckpt.prune_checkpoints(tmp_path, keep=1)
    assert [p.name for p in removed] == ["step_000001"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000002", "step_000003"]
    with pytest.warns(UserWarning, match="step_000003"):
        assert ckpt.latest_valid_checkpoint(tmp_path).name == "step_000002"


def test_pruning_reads_marker_and_sizes_but_never_re_hashes(tmp_path, monkeypatch):
    for step in (1, 2, 3):
        _write(tmp_path, step)
    hashed: list[str] = []
    real_digest = digests.digest_file
    monkeypatch.setattr(
        digests, "digest_file", lambda path, a: hashed.append(path.name) or real_digest(path, a)
    )
    ckpt.prune_checkpoints(tmp_path, keep=2)
    assert hashed == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000002", "step_000003"]
