"""Token embedding lookup (T1), sinusoidal positions (T5) and LayerNorm (T18)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lmforge.model.block import Block
from lmforge.model.config import ModelConfig
from lmforge.model.positions import SinusoidalPositions, sinusoidal_table


def test_one_hot_times_embedding_matrix_selects_the_token_rows(make_model):
    model = make_model(vocab_size=10600, d_model=8, n_head=2, lively=False)
    ids = torch.tensor([5, 4000, 10532, 2224])  # "thanks for all the" (T1)
    embedding = model.wte.weight
    one_hot = F.one_hot(ids, num_classes=10600).to(embedding.dtype)
    assert torch.equal(one_hot @ embedding, embedding[ids])
    assert torch.equal(model.wte(ids), embedding[ids])


def test_sinusoidal_table_with_base_100_matches_the_slide_table():
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.84, 0.54, 0.10, 1.0],
            [0.91, -0.42, 0.20, 0.98],
            [0.14, -0.99, 0.30, 0.96],
        ]
    )
    table = sinusoidal_table(4, 4, base=100.0)
    assert torch.allclose(table, expected, atol=0.005)


def test_sinusoidal_table_with_base_10000_follows_the_formula():
    table = sinusoidal_table(4, 4)
    assert torch.allclose(table[1], torch.tensor([0.8415, 0.5403, 0.0100, 1.0000]), atol=1e-4)
    assert torch.allclose(table[3, 2:], torch.tensor([0.0300, 0.9996]), atol=1e-4)
    d, pos, i = 16, 7, 3
    wide = sinusoidal_table(10, d)
    assert math.isclose(wide[pos, 2 * i], math.sin(pos / 10000 ** (2 * i / d)), abs_tol=1e-6)
    assert math.isclose(wide[pos, 2 * i + 1], math.cos(pos / 10000 ** (2 * i / d)), abs_tol=1e-6)


def test_sinusoidal_positions_are_fixed_and_not_saved():
    positions = SinusoidalPositions(8, 4)
    assert list(positions.parameters()) == []
    assert positions.state_dict() == {}
    assert torch.equal(positions(torch.tensor([2, 0])), sinusoidal_table(8, 4)[[2, 0]])


def test_layer_norm_uses_the_population_variance():
    cfg = ModelConfig(vocab_size=10, block_size=4, d_model=4, n_head=1, n_layer=1, d_ff=8)
    block = Block(cfg)
    out = block.ln_1(torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
    expected = torch.tensor([[-1.3416, -0.4472, 0.4472, 1.3416]])
    assert torch.allclose(out, expected, atol=1e-4)
    assert abs(out.mean().item()) < 1e-6
    assert math.isclose(out.var(unbiased=False).item(), 1.0, abs_tol=1e-4)
