"""The typed configuration of the decoder-only transformer, and its named size presets.

Field names match `conf/model/*.yaml` one to one; `vocab_size` comes from the trained tokenizer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

NORM_PLACEMENTS = ("pre", "post")
POSITION_ENCODINGS = ("learned", "sinusoidal")
ACTIVATIONS = ("gelu", "gelu_exact", "relu")


@dataclass(kw_only=True, slots=True)
class ModelConfig:
    """Shape and options of a GPT-style decoder-only transformer (SEED-REQUIREMENTS section A)."""

    vocab_size: int
    """Number of token ids, i.e. rows of the embedding matrix E (A1)."""
    block_size: int
    """Longest context in tokens; also the number of position embeddings (A25)."""
    d_model: int
    """Width d of the residual stream (A23)."""
    n_head: int
    """Number of attention heads h; each head has d_k = d_model / n_head (A12)."""
    n_layer: int
    """Number of stacked transformer blocks (A24)."""
    d_ff: int
    """Hidden width of the position-wise feed-forward layer, usually 4 * d_model (A15)."""
    norm: str = "pre"
    """LayerNorm placement: 'pre' (with a final LayerNorm, A17) or 'post' (original, A18)."""
    positions: str = "learned"
    """Absolute positions: 'learned' embeddings (A3) or a fixed 'sinusoidal' table (A4)."""
    pos_base: float = 10000.0
    """Base of the sinusoidal table: PE(pos, 2i) = sin(pos / base^(2i/d)) (T5)."""
    activation: str = "gelu"
    """FFN activation: 'gelu' (tanh approximation, as GPT-2), 'gelu_exact' (the erf form, as
    nanoGPT and BERT) or 'relu' (A15)."""
    dropout: float = 0.0
    """Dropout on embeddings, attention weights and residual branches (project choice, B14)."""
    bias: bool = True
    """Whether linear layers and LayerNorms carry bias / offset terms."""
    tie_weights: bool = True
    """Tie the LM head to the token embedding, u = h E^T (A21)."""
    layer_norm_eps: float = 1e-5
    """Epsilon added to the variance in LayerNorm (no seed gives one, A16)."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "d_model", "n_head", "n_layer", "d_ff"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"model.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(
                f"model.d_model={self.d_model} is not divisible by model.n_head={self.n_head}; "
                "pick n_head so that d_model / n_head is an integer head width"
            )
        _check_choice("norm", self.norm, NORM_PLACEMENTS)
        _check_choice("positions", self.positions, POSITION_ENCODINGS)
        _check_choice("activation", self.activation, ACTIVATIONS)
        if self.positions == "sinusoidal" and self.d_model % 2:
            raise ValueError(
                f"model.d_model={self.d_model} must be even for positions='sinusoidal' "
                "(sine and cosine come in pairs of dimensions)"
            )
        if not self.pos_base > 0:
            raise ValueError(f"model.pos_base must be > 0, got {self.pos_base!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"model.layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")
        for name in ("bias", "tie_weights"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"model.{name} must be true or false, got {getattr(self, name)!r}")

    @property
    def head_dim(self) -> int:
        """Per-head width d_k = d_v = d_model / n_head."""
        return self.d_model // self.n_head

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """Build from a plain mapping (e.g. a YAML group), rejecting keys this config lacks."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(
                f"unknown model config key(s) {unknown}; valid keys are {sorted(known)}"
            )
        return cls(**values)

    @classmethod
    def from_preset(cls, name: str, *, vocab_size: int, **overrides: Any) -> ModelConfig:
        """A preset from MODEL_PRESETS with the tokenizer's vocab size and any overrides."""
        if name not in MODEL_PRESETS:
            choices = sorted(MODEL_PRESETS)
            raise ValueError(f"unknown model preset {name!r}; choose one of {choices}")
        return cls.from_dict({**MODEL_PRESETS[name], "vocab_size": vocab_size, **overrides})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable mapping; `from_dict(to_dict())` gives an equal config."""
        return dataclasses.asdict(self)


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"model.{name} must be one of {list(choices)}, got {value!r}")


MODEL_PRESETS: dict[str, dict[str, Any]] = {
    # Seconds on a laptop CPU; for tests and the embedded demo corpus.
    "tiny": {"d_model": 64, "n_head": 4, "n_layer": 2, "d_ff": 256, "block_size": 64},
    # Minutes to tens of minutes on a CPU or one GPU.
    "small": {"d_model": 256, "n_head": 4, "n_layer": 4, "d_ff": 1024, "block_size": 256},
    # The original transformer's base dimensions (A23): d=512, h=8, d_ff=2048, 6 blocks.
    "base": {"d_model": 512, "n_head": 8, "n_layer": 6, "d_ff": 2048, "block_size": 512},
    # GPT-2 small, 124M parameters with a 50257-token vocabulary.
    "gpt2": {"d_model": 768, "n_head": 12, "n_layer": 12, "d_ff": 3072, "block_size": 1024},
}
