"""Scaling-law predictions (Kaplan et al. 2020, B8-B9) and the non-embedding parameter count (B10).

L(N) = (N_c/N)^a_N, L(D) = (D_c/D)^a_D, L(C) = (C_c/C)^a_C, each holding the other two factors
from being the bottleneck; losses are in nats per token. The constants "depend on the exact
transformer architecture, tokenization, and vocabulary size" (B9): they were fitted on Kaplan's
data and tokenizer, so beside a measured loss they are a reference point, not an expected value.
"""

from __future__ import annotations

ALPHA_N = 0.076
N_C = 8.8e13  # non-embedding parameters
ALPHA_D = 0.095
D_C = 5.4e13  # tokens
ALPHA_C = 0.050
C_C = 3.1e8  # petaflop-days

FLOPS_PER_PF_DAY = 1e15 * 86_400


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be positive for a power law, got {value}")


def loss_from_params(n_params: float) -> float:
    """L(N) = (N_c / N)^0.076, N = non-embedding parameters (eq 10.52)."""
    _positive("n_params", n_params)
    return (N_C / n_params) ** ALPHA_N


def loss_from_tokens(n_tokens: float) -> float:
    """L(D) = (D_c / D)^0.095, D = dataset size in tokens (eq 10.53)."""
    _positive("n_tokens", n_tokens)
    return (D_C / n_tokens) ** ALPHA_D


def loss_from_compute(pf_days: float) -> float:
    """L(C) = (C_c / C)^0.050, C = compute in petaflop-days (eq 10.54)."""
    _positive("pf_days", pf_days)
    return (C_C / pf_days) ** ALPHA_C


def non_embedding_params(n_layer: int, d_model: int) -> int:
    """12 n_layer d^2 (eq 10.55, assuming d_attn = d_ff / 4 = d; biases ignored)."""
    return 12 * n_layer * d_model * d_model


def non_embedding_params_exact(n_layer: int, d_model: int, d_attn: int, d_ff: int) -> int:
    """2 d n_layer (2 d_attn + d_ff): Q, K, V, O projections plus the two FFN matrices per layer."""
    return 2 * d_model * n_layer * (2 * d_attn + d_ff)


def training_compute_pf_days(n_params: float, n_tokens: float) -> float:
    """C ~ 6 N D FLOPs (forward + backward) in petaflop-days.

    The 6ND rule is Kaplan et al.'s approximation, not stated in the seeds (a project choice).
    """
    return 6.0 * n_params * n_tokens / FLOPS_PER_PF_DAY


def scaling_prediction(
    n_layer: int, d_model: int, n_tokens: float, measured_loss: float | None = None
) -> dict[str, float]:
    """The three single-factor predictions for a run, beside its measured loss when given.

    `limiting_loss` is the larger of L(N) and L(D): the loss neither the model size nor the data
    size alone would let the run go below, by these fits. `measured_minus_limiting` > 0 means the
    run is above that bound (the usual case for a short run); < 0 says the fits, made with another
    tokenizer and data, do not transfer to this run.
    """
    n_params = non_embedding_params(n_layer, d_model)
    pf_days = training_compute_pf_days(n_params, n_tokens)
    from_params = loss_from_params(n_params)
    from_tokens = loss_from_tokens(n_tokens)
    prediction = {
        "non_embedding_params": float(n_params),
        "train_tokens": float(n_tokens),
        "compute_pf_days": pf_days,
        "loss_from_params": from_params,
        "loss_from_tokens": from_tokens,
        "loss_from_compute": loss_from_compute(pf_days),
        "limiting_loss": max(from_params, from_tokens),
    }
    if measured_loss is not None:
        prediction["measured_loss"] = measured_loss
        prediction["measured_minus_limiting"] = measured_loss - prediction["limiting_loss"]
    return prediction
