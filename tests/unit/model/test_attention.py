"""Masked scaled dot-product attention: the mask (T2), SDPA against the written-out formula,
the KV cache, causality and permutation equivariance (A6-A14)."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.model.attention import CausalSelfAttention, causal_mask, reference_attention


def test_causal_mask_is_zero_on_and_below_the_diagonal_and_minus_infinity_above():
    mask = causal_mask(4)
    for i in range(4):
        for j in range(4):
            assert mask[i, j] == (0.0 if j <= i else float("-inf"))
    weights = torch.softmax(torch.randn(4, 4) + mask, dim=-1)
    assert torch.equal(weights.triu(diagonal=1), torch.zeros(4, 4))
    assert torch.allclose(weights.sum(dim=-1), torch.ones(4))


def test_reference_attention_matches_the_per_position_equations():
    torch.manual_seed(0)
    n, d_k = 5, 8
    q, k, v = torch.randn(n, d_k), torch.randn(n, d_k), torch.randn(n, d_k)
    rows = []
    for i in range(n):  # alpha_ij = softmax_j<=i(q_i . k_j / sqrt(d_k)); head_i = sum alpha_ij v_j
        scores = torch.stack([q[i] @ k[j] / math.sqrt(d_k) for j in range(i + 1)])
        alpha = torch.exp(scores) / torch.exp(scores).sum()
        rows.append(sum(alpha[j] * v[j] for j in range(i + 1)))
    assert torch.allclose(reference_attention(q, k, v), torch.stack(rows), atol=1e-6)


def _attention(causal: bool = True) -> CausalSelfAttention:
    torch.manual_seed(0)
    return CausalSelfAttention(32, 4, causal=causal).eval()


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_attention_equals_the_reference_implementation(causal):
    attn = _attention(causal)
    x = torch.randn(3, 10, 32)
    fast = attn(x)
    attn.attn_impl = "reference"
    assert (fast - attn(x)).abs().max() < 1e-5


def test_model_logits_are_the_same_with_sdpa_and_reference_attention(make_model):
    model = make_model()
    idx = torch.randint(0, 97, (2, 20))
    fast, _ = model(idx)
    model.set_attention_impl("reference")
    slow, _ = model(idx)
    assert (fast - slow).abs().max() < 1e-5


@pytest.mark.parametrize("impl", ["sdpa", "reference"])
def test_kv_cache_gives_the_logits_of_a_full_forward(make_model, impl):
    model = make_model(norm="post")
    model.set_attention_impl(impl)
    idx = torch.randint(0, 97, (2, 12))
    full, _ = model(idx)
    cache = model.new_kv_cache(2)
    chunks = [idx[:, :5], idx[:, 5:8], idx[:, 8:9], idx[:, 9:12]]  # several new tokens at once too
    stepped = torch.cat([model(chunk, kv_cache=cache)[0] for chunk in chunks], dim=1)
    assert cache.length == 12
    assert (full - stepped).abs().max() < 1e-5


def test_kv_cache_refuses_to_grow_past_its_capacity(make_model):
    model = make_model()
    cache = model.new_kv_cache(1, max_len=4)
    model(torch.zeros(1, 4, dtype=torch.long), kv_cache=cache)
    with pytest.raises(ValueError, match="at most 4 positions"):
        model(torch.zeros(1, 1, dtype=torch.long), kv_cache=cache)


def test_unmasked_attention_without_positions_is_permutation_equivariant():
    attn = _attention(causal=False)
    x = torch.randn(1, 7, 32)
    perm = torch.randperm(7)
    assert torch.allclose(attn(x[:, perm]), attn(x)[:, perm], atol=1e-5)


def test_causal_attention_is_not_permutation_equivariant():
    attn = _attention(causal=True)
    x = torch.randn(1, 7, 32)
    perm = torch.tensor([6, 5, 4, 3, 2, 1, 0])
    assert not torch.allclose(attn(x[:, perm]), attn(x)[:, perm], atol=1e-3)


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_changing_future_tokens_never_changes_past_logits(make_model, norm, positions):
    model = make_model(norm=norm, positions=positions)
    idx = torch.randint(0, 97, (1, 16))
    changed = idx.clone()
    changed[0, 9:] = (changed[0, 9:] + 1 + torch.arange(7)) % 97
    before, _ = model(idx)
    after, _ = model(changed)
    assert torch.allclose(before[0, :9], after[0, :9], atol=1e-6)
    assert not torch.allclose(before[0, 9:], after[0, 9:], atol=1e-3)


def test_sequences_longer_than_the_context_are_refused(make_model):
    model = make_model()
    with pytest.raises(ValueError, match="exceed model.block_size=32"):
        model(torch.zeros(1, 33, dtype=torch.long))


def test_cpu_autocast_attends_in_fp32_between_bf16_projections():
    # The CPU's bf16 attention kernels are slower than its fp32 ones (backward 3x, Zen 4), so
    # under CPU autocast the projections run in bf16 and the attention itself in fp32.
    attention = _attention().train()
    x = torch.randn(2, 6, 32)
    seen: dict[str, torch.dtype] = {}

    def attend(q, k, v, attn_mask):
        out = CausalSelfAttention._attend(attention, q, k, v, attn_mask)
        seen.update(q=q.dtype, out=out.dtype)
        return out

    attention._attend = attend
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = attention(x)
    assert seen == {"q": torch.bfloat16, "out": torch.float32}
    assert y.dtype == torch.bfloat16  # c_proj, a matmul, autocasts
    q, k, v = (torch.randn(1, 4, 6, 8, dtype=torch.bfloat16) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = CausalSelfAttention._attend(attention, q, k, v, None)
    want = reference_attention(q.float(), k.float(), v.float())
    assert torch.allclose(got, want, atol=1e-5)
