"""The FFN's activation computes the function its name gives (A15): ReLU, GPT-2's tanh-GELU,
or the erf GELU (nanoGPT's), each against its formula written out."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.model.block import ACTIVATION_FNS, MLP
from lmforge.model.config import ACTIVATIONS, ModelConfig


def _mlp(activation: str) -> MLP:
    cfg = ModelConfig(
        vocab_size=8, block_size=4, d_model=4, n_head=1, n_layer=1, d_ff=6, activation=activation
    )
    torch.manual_seed(0)
    return MLP(cfg)


def _tanh_gelu(h: torch.Tensor) -> torch.Tensor:
    return 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))


def _erf_gelu(h: torch.Tensor) -> torch.Tensor:
    return 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))


@pytest.mark.parametrize(
    ("activation", "formula"),
    [("gelu", _tanh_gelu), ("gelu_exact", _erf_gelu), ("relu", lambda h: h.clamp(min=0))],
)
def test_each_activation_is_its_formula(activation, formula):
    mlp = _mlp(activation)
    x = torch.randn(3, 5, 4, generator=torch.Generator().manual_seed(1)) * 3
    expected = mlp.c_proj(formula(mlp.c_fc(x)))
    assert torch.allclose(mlp(x), expected, atol=1e-6)


def test_the_two_gelus_differ_where_the_approximation_does():
    h = torch.linspace(-4, 4, 801)
    gap = (_tanh_gelu(h) - _erf_gelu(h)).abs().max()
    assert 1e-4 < gap < 1e-3  # the tanh form's known error: close, but another function
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(2)) * 3
    assert not torch.equal(_mlp("gelu")(x), _mlp("gelu_exact")(x))


def test_every_configurable_activation_has_its_function():
    assert set(ACTIVATION_FNS) == set(ACTIVATIONS)
