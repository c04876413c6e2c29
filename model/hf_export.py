"""Export a GPT as a Hugging Face `GPT2LMHeadModel` directory, loadable with
`transformers.AutoModelForCausalLM.from_pretrained(dir)` and served by MLflow or vLLM.

Our pre-norm blocks are GPT-2's blocks: fused `c_attn` Q|K|V, `c_proj`, `c_fc`, LayerNorms
`ln_1`/`ln_2`/`ln_f`. Differences are bridged in the weights: GPT-2's Conv1D stores weights as
[in, out] (ours, nn.Linear, are [out, in]); a sinusoidal table becomes a fixed `wpe`; bias=False
becomes zero biases; relu maps to 'relu' and tanh-GELU to 'gelu_new'. Post-norm has no GPT-2
equivalent, so it is exported in lmforge's own format (`save_model_dir`) with a note.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from lmforge.model.gpt import GPT
from lmforge.model.positions import sinusoidal_table
from lmforge.model.weights import save_model_dir

if TYPE_CHECKING:
    from transformers import GenerationConfig, GPT2Config

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
HF_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}
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
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer_dir is not None:
        _copy_tokenizer(Path(tokenizer_dir), out_dir)
    if model.config.norm != "pre":
        note = (
            "norm='post' has no transformers GPT-2 equivalent (GPT-2 is pre-norm); wrote the "
            "lmforge format: load it with lmforge.model.weights.load_model_dir"
        )
        save_model_dir(model, out_dir)
        (out_dir / NOTE_FILE).write_text(note + "\n")
        return ExportResult(path=out_dir, format="lmforge", note=note)
    hf_config = gpt2_config(model, eos_token_id=eos_token_id)
    hf_config.save_pretrained(out_dir)
    state = gpt2_state_dict(model)
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    _generation_config(eos_token_id).save_pretrained(out_dir)
    note = "transformers GPT2LMHeadModel (pre-norm maps one to one)"
    return ExportResult(path=out_dir, format="hf-gpt2", note=note)


def gpt2_config(model: GPT, *, eos_token_id: int | None = None) -> GPT2Config:
    """The `transformers.GPT2Config` describing this model."""
    from transformers import GPT2Config

    cfg = model.config
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
    cfg = model.config
    out: dict[str, Tensor] = {"transformer.wte.weight": model.wte.weight}
    if isinstance(model.wpe, nn.Embedding):
        out["transformer.wpe.weight"] = model.wpe.weight
    else:
        out["transformer.wpe.weight"] = sinusoidal_table(cfg.block_size, cfg.d_model, cfg.pos_base)
    for i, block in enumerate(model.blocks):
        prefix = f"transformer.h.{i}."
        out.update(_layer_norm(prefix + "ln_1", block.ln_1))
        out.update(_conv1d(prefix + "attn.c_attn", block.attn.c_attn))
        out.update(_conv1d(prefix + "attn.c_proj", block.attn.c_proj))
        out.update(_layer_norm(prefix + "ln_2", block.ln_2))
        out.update(_conv1d(prefix + "mlp.c_fc", block.mlp.c_fc))
        out.update(_conv1d(prefix + "mlp.c_proj", block.mlp.c_proj))
    out.update(_layer_norm("transformer.ln_f", model.ln_f))
    if not cfg.tie_weights:
        out["lm_head.weight"] = model.lm_head.weight
    dtype = model.wte.weight.dtype
    return {k: v.detach().to(device="cpu", dtype=dtype).contiguous() for k, v in out.items()}


def _conv1d(name: str, linear: nn.Linear) -> dict[str, Tensor]:
    bias = linear.bias if linear.bias is not None else torch.zeros(linear.out_features)
    return {name + ".weight": linear.weight.t(), name + ".bias": bias}


def _layer_norm(name: str, norm: nn.LayerNorm) -> dict[str, Tensor]:
    bias = norm.bias if norm.bias is not None else torch.zeros_like(norm.weight)
    return {name + ".weight": norm.weight, name + ".bias": bias}


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
