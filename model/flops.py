"""Training compute per token and model FLOPs utilisation (MFU), from the config alone."""

from __future__ import annotations

from lmforge.model.config import ModelConfig


def non_embedding_parameters(cfg: ModelConfig) -> int:
    """Kaplan's N: every parameter except token/position embeddings (and an untied LM head).

    Per block: 4 d^2 (Q, K, V, W^O) + 2 d d_ff (FFN) matmul weights, plus biases (3d + d + d_ff
    + d) and two LayerNorms (2d each, d without offsets); pre-norm adds one final LayerNorm.
    With d_ff = 4d and biases ignored this is 12 n_layer d^2 (B10). Equals GPT.num_parameters().
    """
    d, d_ff = cfg.d_model, cfg.d_ff
    matmul = 4 * d * d + 2 * d * d_ff
    biases = (3 * d + d + d_ff + d) if cfg.bias else 0
    layer_norm = 2 * d if cfg.bias else d
    per_block = matmul + biases + 2 * layer_norm
    final_norm = layer_norm if cfg.norm == "pre" else 0
    return cfg.n_layer * per_block + final_norm


def parameters(cfg: ModelConfig) -> int:
    """Every parameter of the model, a tied LM head counted once (GPT.num_parameters(False)):
    N plus the token embeddings, learned positions and an untied head."""
    embeddings = cfg.vocab_size * cfg.d_model * (1 if cfg.tie_weights else 2)
    if cfg.positions == "learned":
        embeddings += cfg.block_size * cfg.d_model
    return non_embedding_parameters(cfg) + embeddings


def flops_per_token(cfg: ModelConfig) -> float:
    """FLOPs of one training step (forward + backward) per token at full context:

        C = 6 N + 12 n_layer d_model T

    N = non_embedding_parameters(cfg): each weight does one multiply-add (2 FLOPs) per token in
    the forward pass and twice that in the backward pass, 6 N in all. The second term is the
    attention scores and weighted sum (Q K^T and A V: 2 * 2 * T * d per layer forward, times 3 for
    forward + backward) at context T = block_size, as in PaLM (Chowdhery et al. 2022, appendix B)
    and Chinchilla (Hoffmann et al. 2022, appendix F). The LM head matmul is not in N, so a
    large-vocabulary small model does more real work than this counts.
    """
    return 6.0 * non_embedding_parameters(cfg) + 12.0 * cfg.n_layer * cfg.d_model * cfg.block_size


def compute_parameters(cfg: ModelConfig) -> int:
    """A scaling law's N: every parameter that costs FLOPs per token, i.e. all but the embedding
    lookups (token and learned positions), the LM head included (tied or not, its matmul runs).
    At small sizes the head is most of it; leaving it out is part of why Kaplan's and
    Chinchilla's exponents disagree (Porian et al. 2024)."""
    return non_embedding_parameters(cfg) + cfg.vocab_size * cfg.d_model


def training_flops_per_token(cfg: ModelConfig) -> float:
    """FLOPs of one training step per token with the LM head: 6 N (N = compute_parameters, the
    head's matmul included) + the attention term of `flops_per_token`. The compute budget of a
    run is this times its tokens; MFU keeps `flops_per_token`, without the head."""
    return flops_per_token(cfg) + 6.0 * cfg.d_model * cfg.vocab_size


def mfu(tokens_per_s: float, cfg: ModelConfig, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved training FLOP/s over the hardware's peak FLOP/s."""
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be > 0, got {peak_flops!r}")
    return tokens_per_s * flops_per_token(cfg) / peak_flops
