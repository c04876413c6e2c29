"""Parameter counts (T3, B10), weight tying (A21), optimizer groups and training FLOPs."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.flops import (
    compute_parameters,
    flops_per_token,
    mfu,
    non_embedding_parameters,
    parameters,
    training_flops_per_token,
)
from lmforge.model.gpt import GPT


def _base_without_biases() -> ModelConfig:
    return ModelConfig(
        vocab_size=100, block_size=64, d_model=512, n_head=8, n_layer=6, d_ff=2048,
        activation="relu", bias=False,
    )  # fmt: skip


def test_twelve_n_layer_d_squared_counts_the_base_model():
    assert 12 * 6 * 512**2 == 18_874_368
    model = GPT(_base_without_biases())
    block_matrices = sum(p.numel() for p in model.blocks.parameters() if p.dim() == 2)
    assert block_matrices == 18_874_368  # exactly: 4 d^2 attention + 2 * d * 4d FFN per block
    counted = model.num_parameters(non_embedding=True)  # adds only LayerNorm gains (13 * 512)
    assert counted == 18_874_368 + 13 * 512
    assert math.isclose(counted, 12 * 6 * 512**2, rel_tol=0.01)


def test_gpt3_arithmetic_gives_about_175_billion():
    assert 12 * 96 * 12288**2 == 173_946_175_488
    assert math.isclose(12 * 96 * 12288**2, 175e9, rel_tol=0.01)
    gpt3 = ModelConfig(
        vocab_size=50257, block_size=2048, d_model=12288, n_head=96, n_layer=96,
        d_ff=4 * 12288, bias=False,
    )  # fmt: skip
    assert math.isclose(non_embedding_parameters(gpt3), 175e9, rel_tol=0.01)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"bias": False},
        {"norm": "post"},
        {"tie_weights": False},
        {"positions": "sinusoidal", "norm": "post", "bias": False},
    ],
)
def test_analytic_count_equals_the_built_model(make_model, overrides):
    model = make_model(lively=False, **overrides)
    assert non_embedding_parameters(model.config) == model.num_parameters(non_embedding=True)
    assert parameters(model.config) == model.num_parameters(non_embedding=False)
    assert parameters(model.config) == sum(p.numel() for p in model.parameters())


def test_full_count_adds_the_embeddings_once_when_tied(make_model):
    model = make_model(lively=False)
    cfg = model.config
    embeddings = cfg.vocab_size * cfg.d_model + cfg.block_size * cfg.d_model
    assert model.num_parameters(non_embedding=False) == model.num_parameters() + embeddings


def test_tied_head_is_one_tensor_and_untied_is_not(make_model):
    tied = make_model(tie_weights=True)
    assert tied.lm_head.weight is tied.wte.weight
    assert tied.lm_head.weight.data_ptr() == tied.wte.weight.data_ptr()
    untied = make_model(tie_weights=False)
    assert untied.lm_head.weight.data_ptr() != untied.wte.weight.data_ptr()
    assert not torch.equal(untied.lm_head.weight, untied.wte.weight)


def test_init_is_seeded_and_scales_residual_projections(make_model):
    a, b = make_model(seed=3, lively=False), make_model(seed=3, lively=False)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    big = GPT(ModelConfig(vocab_size=50, block_size=8, d_model=256, n_head=4, n_layer=8, d_ff=1024))
    assert math.isclose(big.blocks[0].mlp.c_fc.weight.std().item(), 0.02, rel_tol=0.05)
    residual = 0.02 / math.sqrt(2 * 8)
    assert math.isclose(big.blocks[0].mlp.c_proj.weight.std().item(), residual, rel_tol=0.05)


@pytest.mark.parametrize("tie_weights", [True, False])
def test_weight_decay_applies_to_matmul_weights_only(make_model, tie_weights):
    model = make_model(tie_weights=tie_weights)
    decay, no_decay = model.param_groups(weight_decay=0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    expected = {
        f"blocks.{i}.{m}.weight"
        for i in range(2)
        for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
    }
    assert decayed == (expected if tie_weights else expected | {"lm_head.weight"})
    undecayed = {names[id(p)] for p in no_decay["params"]}
    assert {"wte.weight", "wpe.weight", "ln_f.weight", "blocks.0.ln_1.bias"} <= undecayed
    all_params = decay["params"] + no_decay["params"]
    assert sum(p.numel() for p in all_params) == model.num_parameters(non_embedding=False)
    torch.optim.AdamW(model.param_groups(0.1), lr=1e-3)  # no parameter appears twice


def test_flops_per_token_on_a_hand_computed_config():
    cfg = ModelConfig(vocab_size=97, block_size=64, d_model=64, n_head=4, n_layer=2, d_ff=256)
    # per block: 4*64^2 + 2*64*256 = 49152 weights, 3*64+64+256+64 = 576 biases, 2*128 LN
    n = 2 * (49152 + 576 + 256) + 128
    assert non_embedding_parameters(cfg) == n == 100_096
    assert flops_per_token(cfg) == 6 * 100_096 + 12 * 2 * 64 * 64 == 698_880
    assert math.isclose(mfu(1000.0, cfg, peak_flops=698_880_000.0), 1.0)
    assert math.isclose(mfu(250.0, cfg, peak_flops=698_880_000.0), 0.25)


def test_a_scaling_laws_n_and_budget_count_the_lm_head_but_not_the_embedding_lookup():
    cfg = ModelConfig(vocab_size=97, block_size=64, d_model=64, n_head=4, n_layer=2, d_ff=256)
    assert compute_parameters(cfg) == 100_096 + 97 * 64
    assert training_flops_per_token(cfg) == 6 * (100_096 + 97 * 64) + 12 * 2 * 64 * 64
    assert flops_per_token(cfg) == 698_880  # MFU's count keeps its own
    untied = ModelConfig(
        vocab_size=97, block_size=64, d_model=64, n_head=4, n_layer=2, d_ff=256, tie_weights=False
    )
    assert compute_parameters(untied) == compute_parameters(cfg)
