"""Perplexity and bits per byte from negative log-likelihoods in nats.

No seed defines perplexity (F1 is a gap); the form consistent with the token cross-entropy of B2/B3
is PPL = exp(mean token cross-entropy, natural log). Perplexity depends on the tokenizer, so it
compares models only when they share one. Bits per byte divides the total negative log-likelihood
(converted to bits) by the UTF-8 byte count of the text those tokens encode, which does not depend
on how the text was cut into tokens and so compares models across tokenizers.

A confidence interval for perplexity resamples documents, not tokens: the tokens of one document
are far from independent, so a token-level bootstrap would claim a precision the split lacks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


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


def document_sums(
    position_nll: np.ndarray, doc_starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(summed NLL, predicted tokens) per document of a scored token stream.

    `position_nll[i]` is the loss of predicting token i + 1; it belongs to the document whose
    start offset (`doc_starts`, ascending, into the same stream) is the last one <= i + 1.
    """
    targets = np.arange(1, len(position_nll) + 1)
    doc = np.maximum(np.searchsorted(doc_starts, targets, side="right") - 1, 0)
    n_docs = max(len(doc_starts), 1)
    nll = np.bincount(doc, weights=position_nll, minlength=n_docs)
    tokens = np.bincount(doc, minlength=n_docs)
    keep = tokens > 0
    return nll[keep], tokens[keep]


RESAMPLE_CHUNK = 1 << 22
"""Document picks drawn at once (32 MB of int64): resamples are made in chunks of rows, so the
bootstrap's memory does not grow with the number of documents times `n_boot`."""


def _resampled_sums(arrays: list[np.ndarray], n_boot: int, seed: int, level: float) -> list:
    """For each array, its sum over each of `n_boot` resamples of documents with replacement
    (the same resamples for every array: a paired bootstrap)."""
    n_docs = arrays[0].size
    if n_docs == 0:
        raise ValueError("need per-document NLL and token counts of equal, non-zero length")
    if n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"need n_boot >= 1 and 0 < level < 1, got {n_boot}, {level}")
    rng = np.random.default_rng(seed)
    rows = max(1, RESAMPLE_CHUNK // n_docs)
    sums: list[list[np.ndarray]] = [[] for _ in arrays]
    for start in range(0, n_boot, rows):
        picks = rng.integers(0, n_docs, size=(min(rows, n_boot - start), n_docs))
        for out, values in zip(sums, arrays, strict=True):
            out.append(values[picks].sum(1))
    return [np.concatenate(parts) for parts in sums]


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)


def bootstrap_perplexity_interval(
    doc_nll: np.ndarray,
    doc_tokens: np.ndarray,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap interval of perplexity, resampling whole documents with replacement:
    each resample's perplexity is exp(sum of its documents' NLL / sum of their tokens)."""
    doc_nll, doc_tokens = np.asarray(doc_nll, np.float64), np.asarray(doc_tokens, np.float64)
    if doc_nll.shape != doc_tokens.shape:
        raise ValueError("need per-document NLL and token counts of equal, non-zero length")
    nll, tokens = _resampled_sums([doc_nll, doc_tokens], n_boot, seed, level)
    return _percentiles(np.exp(nll / tokens), level)


def bootstrap_ratio_interval(
    doc_nll: np.ndarray,
    baseline_doc_nll: np.ndarray,
    doc_tokens: np.ndarray,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Paired bootstrap interval of perplexity / baseline perplexity on the same tokens: both are
    summed over the same resampled documents, exp((NLL - baseline NLL) / tokens)."""
    arrays = [np.asarray(a, np.float64) for a in (doc_nll, baseline_doc_nll, doc_tokens)]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError("need per-document NLL and token counts of equal, non-zero length")
    nll, base, tokens = arrays
    gap, tokens = _resampled_sums([nll - base, tokens], n_boot, seed, level)
    return _percentiles(np.exp(gap / tokens), level)
