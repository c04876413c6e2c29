"""Perplexity and bits per byte from negative log-likelihoods in nats.

No seed defines perplexity (F1 is a gap); the form consistent with the token cross-entropy of B2/B3
is PPL = exp(mean token cross-entropy, natural log). Perplexity depends on the tokenizer, so it
compares models only when they share one. Bits per byte divides the total negative log-likelihood
(converted to bits) by the UTF-8 byte count of the text those tokens encode, which does not depend
on how the text was cut into tokens and so compares models across tokenizers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def mean_nll(total_nll_nats: float, n_tokens: int) -> float:
    """Mean negative log-likelihood per predicted token (the cross-entropy loss)."""
    if n_tokens <= 0:
        raise ValueError(f"n_tokens must be positive to average a loss, got {n_tokens}")
    return total_nll_nats / n_tokens


def perplexity(mean_nll_nats: float) -> float:
    """exp(mean token cross-entropy in nats); inf for an infinite loss, inf past float range."""
    if mean_nll_nats < 0:
        raise ValueError(f"a cross-entropy is never negative, got {mean_nll_nats}")
    if mean_nll_nats > 709.0:  # exp overflows float64 beyond ~709.78
        return math.inf
    return math.exp(mean_nll_nats)


def bits_per_token(mean_nll_nats: float) -> float:
    """Mean cross-entropy converted from nats to bits."""
    return mean_nll_nats / math.log(2)


def bits_per_byte(total_nll_nats: float, n_bytes: int) -> float:
    """total NLL / (ln 2 * n_bytes): bits needed per UTF-8 byte of the scored text.

    `n_bytes` must count the bytes of exactly the text whose tokens were scored (for example the
    decoded predicted tokens), so both sides of the ratio describe the same stretch of text.
    """
    if n_bytes <= 0:
        raise ValueError(f"n_bytes must be positive, got {n_bytes}")
    return total_nll_nats / (math.log(2) * n_bytes)


def utf8_byte_count(texts: Iterable[str]) -> int:
    """Total UTF-8 length of `texts`, the denominator of bits per byte."""
    return sum(len(text.encode("utf-8")) for text in texts)
