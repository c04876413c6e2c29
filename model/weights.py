"""Model weights as safetensors, and a model directory (weights + config.json) that rebuilds a GPT.

A tied LM head is one tensor, so it is stored once (as `wte.weight`) and re-tied on load.
`stream_model_dir` writes the same directory without a model in memory: it asks for one tensor
at a time by name (from a sharded training checkpoint, say).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.safetensors_stream import TensorSpec, write_safetensors

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TIED_KEY = "lm_head.weight"


def save_weights(model: GPT, path: str | Path) -> Path:
    """Write the model's parameters (not the fixed sinusoidal table) to a safetensors file."""
    state = {name: t.detach().contiguous() for name, t in model.state_dict().items()}
    if model.config.tie_weights:
        state.pop(TIED_KEY, None)
    path = Path(path)
    save_file(state, str(path), metadata={"format": "pt"})
    return path


def load_weights(model: GPT, path: str | Path, strict: bool = True) -> GPT:
    """Load a safetensors file written by `save_weights` into `model` (in place; returns it).

    strict: every parameter must be present and no extra key may appear.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    state = load_file(str(path), device=str(model.wte.weight.device))
    expected = {k: v.shape for k, v in model.state_dict().items()}
    if model.config.tie_weights:
        expected.pop(TIED_KEY, None)
        state.pop(TIED_KEY, None)
    wrong_shape = {
        k: (tuple(v.shape), tuple(expected[k]))
        for k, v in state.items()
        if k in expected and v.shape != expected[k]
    }
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if wrong_shape or (strict and (missing or unexpected)):
        raise ValueError(
            f"{path} does not match the model: missing {missing}, unexpected {unexpected}, "
            f"shape (file, model) {wrong_shape}; was it saved from a model with this config?"
        )
    model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)
    return model


def save_model_dir(model: GPT, out_dir: str | Path) -> Path:
    """Write `model.safetensors` and `config.json` (the ModelConfig) into out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_weights(model, out_dir / WEIGHTS_FILE)
    (out_dir / CONFIG_FILE).write_text(json.dumps(model.config.to_dict(), indent=2) + "\n")
    return out_dir


def stream_model_dir(
    cfg: ModelConfig,
    tensor_of: Callable[[str], torch.Tensor],
    out_dir: str | Path,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> Path:
    """Write the directory `save_model_dir` writes, asking `tensor_of(name)` for one parameter
    at a time (full fp32 values by parameter name), so only that tensor is held in memory.

    shapes: the tensors to write, by name (default `weight_shapes(cfg)`); a training
    checkpoint's layout names them already, without building the model on the meta device."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    specs = [
        TensorSpec(name, torch.float32, shape, lambda name=name: tensor_of(name))
        for name, shape in (weight_shapes(cfg) if shapes is None else shapes).items()
    ]
    with open(out_dir / WEIGHTS_FILE, "wb") as out:
        write_safetensors(out, specs, metadata={"format": "pt"})
    (out_dir / CONFIG_FILE).write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    return out_dir


def weight_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor `save_weights` writes for this config (no memory used).

    The first call in a process costs about 1.5 s on two cores: drawing the initial weights
    into meta tensors imports torch's compiler (`torch._dynamo`)."""
    with torch.device("meta"):
        shapes = {name: tuple(t.shape) for name, t in GPT(cfg).state_dict().items()}
    if cfg.tie_weights:
        shapes.pop(TIED_KEY, None)
    return shapes


def load_model_dir(model_dir: str | Path) -> GPT:
    """Rebuild the GPT saved by `save_model_dir` (on CPU, in eval mode)."""
    model_dir = Path(model_dir)
    config_path = model_dir / CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} is missing; is {model_dir} a model directory?")
    cfg = ModelConfig.from_dict(json.loads(config_path.read_text()))
    model = GPT(cfg)
    load_weights(model, model_dir / WEIGHTS_FILE)
    return model.eval()
