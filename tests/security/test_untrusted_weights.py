"""A weights file or checkpoint is data, never code: a pickle carrying a payload, dropped where
lmforge expects weights, is refused and its payload never runs.

The payload creates a file when unpickled; the first test shows that it really does under a
plain pickle load, so the refusals below are meaningful.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import pickle

import pytest
import torch
from safetensors import SafetensorError

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.weights import load_model_dir, load_weights, save_model_dir
from lmforge.pipeline.training.checkpoint.consolidated import (
    MARKER,
    MODEL_FILE,
    CheckpointError,
    TrainerState,
    load_checkpoint,
    write_checkpoint,
)

TINY = {"vocab_size": 50, "block_size": 8, "d_model": 16, "n_head": 2, "n_layer": 1, "d_ff": 32}


class Payload:
    """Unpickling this calls Path.touch(witness): stands for any code an attacker wants run."""

    def __init__(self, witness: pathlib.Path) -> None:
        self.witness = witness

    def __reduce__(self):
        return (pathlib.Path.touch, (self.witness,))


def _plant(path: pathlib.Path, witness: pathlib.Path) -> pathlib.Path:
    """A torch-format pickle (what `torch.save` writes) holding the payload, at `path`."""
    torch.save({"wte.weight": Payload(witness)}, path)
    return path


def test_the_payload_runs_under_an_unsafe_load(tmp_path):
    witness = tmp_path / "pwned"
    pickle.loads(pickle.dumps(Payload(witness)))
    assert witness.exists()


def test_torch_load_with_weights_only_refuses_the_payload(tmp_path):
    witness = tmp_path / "pwned"
    path = _plant(tmp_path / "model.pt", witness)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    assert not witness.exists()


def test_loading_weights_refuses_a_pickle_in_place_of_safetensors(tmp_path):
    witness = tmp_path / "pwned"
    path = _plant(tmp_path / "model.safetensors", witness)
    with pytest.raises(SafetensorError):
        load_weights(GPT(ModelConfig(**TINY)), path)
    assert not witness.exists()


def test_loading_a_model_directory_refuses_a_planted_pickle(tmp_path):
    witness = tmp_path / "pwned"
    model_dir = save_model_dir(GPT(ModelConfig(**TINY)), tmp_path / "model")
    _plant(model_dir / "model.safetensors", witness)
    with pytest.raises(SafetensorError):
        load_model_dir(model_dir)
    assert not witness.exists()


def test_resuming_refuses_a_checkpoint_whose_tensors_are_a_pickle(tmp_path):
    """Even with a marker that vouches for the planted file (the attacker rewrote it too)."""
    witness = tmp_path / "pwned"
    model = GPT(ModelConfig(**TINY))
    params = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state = TrainerState(
        step=1,
        adam_step=1,
        sampler_position=0,
        tokens_seen=0,
        seed=0,
        n_windows=1,
        world_size=1,
    )
    checkpoint = write_checkpoint(tmp_path / "ckpt", params, {}, state)
    planted = _plant(checkpoint / MODEL_FILE, witness)
    marker = json.loads((checkpoint / MARKER).read_text())
    data = planted.read_bytes()
    marker["files"][MODEL_FILE] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (checkpoint / MARKER).write_text(json.dumps(marker))
    with pytest.raises(CheckpointError, match="cannot be loaded"):
        load_checkpoint(checkpoint)
    assert not witness.exists()
