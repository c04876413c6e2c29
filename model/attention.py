"""Masked multi-head scaled dot-product self-attention (SEED-REQUIREMENTS A6-A14).

head = softmax(mask(Q K^T / sqrt(d_k))) V per head; heads are concatenated and projected by W^O.
The fast path is `torch.nn.functional.scaled_dot_product_attention` (flash / memory-efficient
kernels on GPU); `reference_attention` spells the same formula out and is what tests compare with.

Masks given by callers are boolean and broadcast to [B, n_head, T_query, T_key]: True means
"may attend". Without one, attention is causal: query i (absolute position past + i) sees keys
0..past + i, which also holds when several new tokens are fed after a non-empty KV cache.
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lmforge.model.kv_cache import LayerKV

ATTENTION_IMPLS = ("sdpa", "reference")


def causal_mask(n_query: int, n_key: int | None = None, *, device=None) -> Tensor:
    """Additive mask M [n_query x n_key]: 0 where key j <= query i, -inf above (A10, T2).

    With n_key > n_query the queries are the last n_query positions (a KV cache holds the past),
    so query i sits at absolute position n_key - n_query + i.
    """
    n_key = n_query if n_key is None else n_key
    allowed = causal_allowed(n_query, n_key, device=device)
    zeros = torch.zeros(n_query, n_key, device=device)
    return zeros.masked_fill(~allowed, float("-inf"))


def causal_allowed(n_query: int, n_key: int, *, device=None) -> Tensor:
    """Boolean [n_query x n_key], True where query i may see key j (j <= n_key - n_query + i)."""
    ones = torch.ones(n_query, n_key, dtype=torch.bool, device=device)
    return ones.tril(diagonal=n_key - n_query)


def reference_attention(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = True, attn_mask: Tensor | None = None
) -> Tensor:
    """softmax(Q K^T / sqrt(d_k) + M) V written out; q [..., T, d_k], k, v [..., S, d_k]."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif causal:
        scores = scores + causal_mask(q.size(-2), k.size(-2), device=q.device).to(scores.dtype)
    return torch.softmax(scores, dim=-1) @ v


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention with fused Q/K/V projection `c_attn` and output W^O `c_proj`."""

    def __init__(
        self,
        d_model: int,
        n_head: int,
        *,
        bias: bool = True,
        dropout: float = 0.0,
        causal: bool = True,
    ) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model={d_model} is not divisible by n_head={n_head}")
        self.d_model = d_model
        self.n_head = n_head
        self.dropout = dropout
        self.causal = causal
        """False only for tests of permutation equivariance (A14)."""
        self.attn_impl = "sdpa"
        """'sdpa' (fused kernels) or 'reference' (the explicit formula)."""
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)  # [W^Q | W^K | W^V], all heads
        self.c_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O
        self.resid_dropout = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, *, attn_mask: Tensor | None = None, kv: LayerKV | None = None
    ) -> Tensor:
        """x [B, T, d] -> [B, T, d]. With `kv`, keys/values of x are appended to the cache first."""
        batch, n_new, _ = x.shape
        q, k, v = self.c_attn(x).split(self.d_model, dim=2)
        q, k, v = (t.view(batch, n_new, self.n_head, -1).transpose(1, 2) for t in (q, k, v))
        if kv is not None:
            k, v = kv.append(k, v)
        y = self._attend(q, k, v, attn_mask)
        y = y.transpose(1, 2).reshape(batch, n_new, self.d_model)
        return self.resid_dropout(self.c_proj(y))

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None) -> Tensor:
        n_query, n_key = q.size(-2), k.size(-2)
        if self.attn_impl == "reference":
            return reference_attention(q, k, v, causal=self.causal, attn_mask=attn_mask)
        if self.attn_impl != "sdpa":
            raise ValueError(f"attn_impl must be one of {ATTENTION_IMPLS}, got {self.attn_impl!r}")
        is_causal = False
        if attn_mask is None and self.causal and n_query > 1:
            if n_query == n_key:
                is_causal = True  # lets SDPA pick the flash kernel
            else:  # new tokens after a cached past: SDPA's is_causal would align top-left
                attn_mask = causal_allowed(n_query, n_key, device=q.device)
        dropout_p = self.dropout if self.training else 0.0
        context = contextlib.nullcontext()
        if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # CPU autocast attends in fp32: the CPU's bf16 attention kernels are the slower
            # ones (the tiny preset's backward: 10 ms a call in bf16, 3 in fp32, Zen 4), and
            # the matmuls around them, the part bf16 speeds up, stay in bf16
            q, k, v = q.float(), k.float(), v.float()
            context = torch.autocast("cpu", enabled=False)
        with context:
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal
            )
