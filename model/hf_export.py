"""Export a GPT as a Hugging Face `GPT2LMHeadModel` directory, loadable with
`transformers.AutoModelForCausalLM.from_pretrained(dir)` and served by MLflow or vLLM.

Our pre-norm blocks are GPT-2's blocks: fused `c_attn` Q|K|V, `c_proj`, `c_fc`, LayerNorms
`ln_1`/`ln_2`/`ln_f`. Differences are bridged in the weights: GPT-2's Conv1D stores weights as
[in, out] (ours, nn.Linear, are [out, in]); a sinusoidal table becomes a fixed `wpe`; bias=False
becomes zero biases; relu maps to 'relu', tanh-GELU to 'gelu_new' and erf-GELU to 'gelu'.
Post-norm has no GPT-2 equivalent, so it is exported in lmforge's own format (`save_model_dir`)
with a note.

`stream_export_hf` writes the same directory from tensors asked for one at a time by name (the
pretrain stage streams them out of the sharded training checkpoint), `export_hf` from a model.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.positions import sinusoidal_table
from lmforge.model.safetensors_stream import TensorSpec, write_safetensors
from lmforge.model.weights import stream_model_dir

if TYPE_CHECKING:
    from transformers import GenerationConfig, GPT2Config

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
HF_ACTIVATIONS = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu"}
NOTE_FILE = "EXPORT_NOTE.txt"


@dataclass(frozen=True, slots=True)
class ExportResult:
    """Where the model went and in which format."""

    path: Path
    """The export directory."""
    format: str
    """'hf-gpt2' (transformers GPT2LMHeadModel) or 'lmforge' (model.safetensors + config.json)."""
    note: str
    """Why the format was chosen, for logs and the model card."""


def export_hf(
    model: GPT,
    out_dir: str | Path,
    tokenizer_dir: str | Path | None = None,
    *,
    eos_token_id: int | None = None,
) -> ExportResult:
    """Write an HF GPT-2 directory (config.json, model.safetensors, generation_config.json and
    the tokenizer files of tokenizer_dir), or the native format when GPT-2 cannot express it."""
    params = dict(model.named_parameters())
    return stream_export_hf(
        model.config,
        lambda name: params[name].detach().to(device="cpu", dtype=torch.float32),
        out_dir,
        tokenizer_dir,
        eos_token_id=eos_token_id,
    )


def stream_export_hf(
    cfg: ModelConfig,
    tensor_of: Callable[[str], Tensor],
    out_dir: str | Path,
    tokenizer_dir: str | Path | None = None,
    *,
    eos_token_id: int | None = None,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> ExportResult:
    """`export_hf` without a model in memory: `tensor_of(name)` gives one of our parameters
    (full fp32, by name) when its GPT-2 counterpart is written, so one tensor is held at a time.
    shapes: our tensors by name, for the lmforge format (`stream_model_dir`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer_dir is not None:
        _copy_tokenizer(Path(tokenizer_dir), out_dir)
    if cfg.norm != "pre":
        note = (
            "norm='post' has no transformers GPT-2 equivalent (GPT-2 is pre-norm); wrote the "
            "lmforge format: load it with lmforge.model.weights.load_model_dir"
        )
        stream_model_dir(cfg, tensor_of, out_dir, shapes)
        (out_dir / NOTE_FILE).write_text(note + "\n")
        return ExportResult(path=out_dir, format="lmforge", note=note)
    gpt2_config(cfg, eos_token_id=eos_token_id).save_pretrained(out_dir)
    with open(out_dir / "model.safetensors", "wb") as out:
        write_safetensors(out, gpt2_specs(cfg, tensor_of), metadata={"format": "pt"})
    _generation_config(eos_token_id).save_pretrained(out_dir)
    note = "transformers GPT2LMHeadModel (pre-norm maps one to one)"
    return ExportResult(path=out_dir, format="hf-gpt2", note=note)


def gpt2_config(model: GPT | ModelConfig, *, eos_token_id: int | None = None) -> GPT2Config:
    """The `transformers.GPT2Config` describing this model (or model config)."""
    from transformers import GPT2Config

    cfg = model.config if isinstance(model, GPT) else model
    return GPT2Config(
        vocab_size=cfg.vocab_size,
        n_positions=cfg.block_size,
        n_embd=cfg.d_model,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_inner=cfg.d_ff,
        activation_function=HF_ACTIVATIONS[cfg.activation],
        resid_pdrop=cfg.dropout,
        embd_pdrop=cfg.dropout,
        attn_pdrop=cfg.dropout,
        layer_norm_epsilon=cfg.layer_norm_eps,
        tie_word_embeddings=cfg.tie_weights,
        bos_token_id=eos_token_id,
        eos_token_id=eos_token_id,
        architectures=["GPT2LMHeadModel"],
    )


def gpt2_state_dict(model: GPT) -> dict[str, Tensor]:
    """Our parameters under GPT-2's names and layouts (Conv1D weights transposed to [in, out])."""
    params = dict(model.named_parameters())
    dtype = model.wte.weight.dtype
    specs = gpt2_specs(model.config, lambda name: params[name].detach().cpu(), dtype)
    return {spec.name: spec.values() for spec in specs}


def gpt2_specs(
    cfg: ModelConfig, tensor_of: Callable[[str], Tensor], dtype: torch.dtype = torch.float32
) -> list[TensorSpec]:
    """GPT-2's tensors, in order, each computed from ours (`tensor_of(name)`) when asked for."""
    specs = [_copy("transformer.wte.weight", "wte.weight", (cfg.vocab_size, cfg.d_model))]
    if cfg.positions == "learned":
        specs.append(_copy("transformer.wpe.weight", "wpe.weight", (cfg.block_size, cfg.d_model)))
    else:
        table = functools.partial(sinusoidal_table, cfg.block_size, cfg.d_model, cfg.pos_base)
        specs.append(("transformer.wpe.weight", (cfg.block_size, cfg.d_model), lambda _: table()))
    d, d_ff = cfg.d_model, cfg.d_ff
    for i in range(cfg.n_layer):
        ours, theirs = f"blocks.{i}.", f"transformer.h.{i}."
        specs += _layer_norm(theirs + "ln_1", ours + "ln_1", d, cfg.bias)
        specs += _conv1d(theirs + "attn.c_attn", ours + "attn.c_attn", d, 3 * d, cfg.bias)
        specs += _conv1d(theirs + "attn.c_proj", ours + "attn.c_proj", d, d, cfg.bias)
        specs += _layer_norm(theirs + "ln_2", ours + "ln_2", d, cfg.bias)
        specs += _conv1d(theirs + "mlp.c_fc", ours + "mlp.c_fc", d, d_ff, cfg.bias)
        specs += _conv1d(theirs + "mlp.c_proj", ours + "mlp.c_proj", d_ff, d, cfg.bias)
    specs += _layer_norm("transformer.ln_f", "ln_f", d, cfg.bias)
    if not cfg.tie_weights:
        specs.append(_copy("lm_head.weight", "lm_head.weight", (cfg.vocab_size, d)))
    return [
        TensorSpec(
            name,
            dtype,
            shape,
            lambda make=make: make(tensor_of).to(device="cpu", dtype=dtype).contiguous(),
        )
        for name, shape, make in specs
    ]


_Spec = tuple[str, tuple[int, ...], Callable[[Callable[[str], Tensor]], Tensor]]
"""(GPT-2 name, shape, how to compute it from our tensors)."""


def _copy(name: str, ours: str, shape: tuple[int, ...]) -> _Spec:
    return (name, shape, lambda get: get(ours))


def _conv1d(name: str, ours: str, d_in: int, d_out: int, bias: bool) -> list[_Spec]:
    """GPT-2's Conv1D stores [in, out]: our nn.Linear weight [out, in], transposed."""
    return [
        (name + ".weight", (d_in, d_out), lambda get: get(ours + ".weight").t()),
        _bias(name + ".bias", ours + ".bias", d_out, bias),
    ]


def _layer_norm(name: str, ours: str, d: int, bias: bool) -> list[_Spec]:
    return [
        _copy(name + ".weight", ours + ".weight", (d,)),
        _bias(name + ".bias", ours + ".bias", d, bias),
    ]


def _bias(name: str, ours: str, d: int, present: bool) -> _Spec:
    """A bias of ours, or zeros where the model has none (bias=False)."""
    if present:
        return _copy(name, ours, (d,))
    return (name, (d,), lambda _: torch.zeros(d))


def _generation_config(eos_token_id: int | None) -> GenerationConfig:
    from transformers import GenerationConfig

    return GenerationConfig(
        bos_token_id=eos_token_id, eos_token_id=eos_token_id, pad_token_id=eos_token_id
    )


def _copy_tokenizer(tokenizer_dir: Path, out_dir: Path) -> None:
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{tokenizer_dir}/tokenizer.json is missing; pass a tokenizer dir")
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).is_file():
            shutil.copy2(tokenizer_dir / name, out_dir / name)
