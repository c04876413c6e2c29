"""The model shapes a scaling grid picks from: the preset's model grown or shrunk in width and
depth, keeping its head width, FFN ratio and (within a factor of 2) its width-to-depth ratio.

A shape's N is `compute_parameters` (every parameter that costs FLOPs per token, the LM head
included) and its FLOPs per token `training_flops_per_token` (6 N plus attention), the counts a
compute budget C = FLOPs per token x tokens is spent in.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from lmforge.model.config import ModelConfig
from lmforge.model.flops import compute_parameters, training_flops_per_token

MAX_HEADS = 128
MAX_LAYERS = 96
ASPECT_SLACK = 2.0
"""How far a shape's d_model / n_layer may stray from the preset's."""
ASPECT_WEIGHT = 0.25
"""How much a shape's straying from the preset's aspect counts against it, beside its N's
log-distance from the one asked (a 2x stray weighs as N 19% off)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """One model of the family, with the counts its budget is spent in."""

    d_model: int
    n_layer: int
    n_head: int
    d_ff: int
    params: int
    """N: parameters that cost FLOPs per token (all but the embedding lookups)."""
    flops_per_token: float

    def overrides(self) -> list[str]:
        """The `model.*` settings of a run of this shape."""
        return [
            f"model.d_model={self.d_model}",
            f"model.n_layer={self.n_layer}",
            f"model.n_head={self.n_head}",
            f"model.d_ff={self.d_ff}",
        ]

    @property
    def label(self) -> str:
        return f"d{self.d_model}xL{self.n_layer}"


def model_config(model: dict, vocab_size: int) -> ModelConfig:
    """The typed model config of a composed `model` section and a vocabulary."""
    return ModelConfig(**{**model, "vocab_size": int(vocab_size)})


def shape_of(cfg: ModelConfig) -> Shape:
    return Shape(
        d_model=cfg.d_model,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        d_ff=cfg.d_ff,
        params=compute_parameters(cfg),
        flops_per_token=training_flops_per_token(cfg),
    )


def shape_family(base: ModelConfig) -> list[Shape]:
    """Every shape of the family, smallest N first: widths in whole heads of the preset's head
    width, depths within `ASPECT_SLACK` of its width-to-depth ratio."""
    head = base.head_dim
    aspect = base.d_model / base.n_layer
    ff_ratio = base.d_ff / base.d_model
    shapes = []
    for heads in range(1, MAX_HEADS + 1):
        d = heads * head
        for layers in range(1, MAX_LAYERS + 1):
            ratio = d / layers / aspect
            if not 1 / ASPECT_SLACK <= ratio <= ASPECT_SLACK and layers > 1:
                continue
            cfg = dataclasses.replace(
                base, d_model=d, n_head=heads, n_layer=layers, d_ff=max(1, round(ff_ratio * d))
            )
            shapes.append(shape_of(cfg))
    return sorted(shapes, key=lambda s: (s.params, s.n_layer))


def nearest_shape(family: list[Shape], params: float, aspect: float) -> Shape:
    """The shape whose N is nearest `params` on a log scale, the preset's width-to-depth ratio
    breaking near-ties."""

    def distance(s: Shape) -> float:
        return abs(math.log(s.params / params)) + ASPECT_WEIGHT * abs(
            math.log(s.d_model / s.n_layer / aspect)
        )

    return min(family, key=distance)
