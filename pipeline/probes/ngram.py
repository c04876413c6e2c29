"""Unigram and bigram language models over token ids with add-k smoothing: the baselines of F4
(the interpolated Kneser-Ney trigram beside them is in `kneser_ney`).

Both models score exactly the positions the transformer scores: in every sequence, token t+1 is
predicted for t = 0 .. len-2 (from token t for the bigram, from nothing for the unigram); the first
token of a sequence is context only. Feed them documents that start with the end-of-text token
(`with_leading_eot`), or the packed windows the transformer is evaluated on, and their
cross-entropy is directly comparable with the transformer's validation loss (same tokenizer, same
positions, nats per token).

Add-k smoothing: P(w) = (c(w) + k) / (N + kV) and P(w | v) = (c(v w) + k) / (c(v) + kV), where
c(v) counts v as a context and V is the vocabulary size. With k = 0 these are the maximum-likelihood
estimates of F4 (an unseen event then has probability 0 and infinite cross-entropy).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from lmforge.pipeline.probes.kneser_ney import KneserNeyTrigramLM
from lmforge.pipeline.probes.perplexity_math import perplexity
from lmforge.pipeline.probes.position_scorer import (
    PositionScorer,
    count_codes,
    sparse_lookup,
    token_ids,
)


def _smoothed_log(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """log(numerator / denominator), with 0 / 0 (unseen context, k = 0) taken as probability 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)
        return np.log(p)


@dataclass(frozen=True, slots=True)
class BigramLM(PositionScorer):
    """P(next | previous) from sparse pair counts."""

    pair_codes: np.ndarray
    """Sorted unique codes previous * vocab_size + next of the pairs seen in training."""
    pair_counts: np.ndarray
    """Occurrences of each pair in `pair_codes`."""
    context_counts: np.ndarray
    """c(v): how often token v was the context of a predicted token, shape [vocab_size]."""
    vocab_size: int
    """Number of token types V (the tokenizer's vocabulary size)."""
    k: float
    """Add-k smoothing constant; 0 gives maximum-likelihood estimates."""

    @classmethod
    def fit(
        cls, sequences: Iterable[Sequence[int] | np.ndarray], vocab_size: int, k: float = 1.0
    ) -> BigramLM:
        """Count every adjacent pair of every sequence (one pass, bounded extra memory)."""
        if k < 0:
            raise ValueError(f"add-k smoothing needs k >= 0, got {k}")
        codes, counts = count_codes(
            sequences, vocab_size, lambda ids: ids[:-1] * vocab_size + ids[1:]
        )
        context = np.bincount(codes // vocab_size, weights=counts, minlength=vocab_size)
        return cls(
            pair_codes=codes,
            pair_counts=counts,
            context_counts=context.astype(np.int64),
            vocab_size=vocab_size,
            k=float(k),
        )

    def pair_count(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        """c(prev token) for arrays of pairs (0 where the pair was never seen)."""
        query = np.asarray(prev, dtype=np.int64) * self.vocab_size + np.asarray(token)
        return sparse_lookup(self.pair_codes, self.pair_counts, query)

    def prob(self, token: int, prev: int) -> float:
        """P(token | prev)."""
        token_ids([token, prev], self.vocab_size)
        logp = self._pair_log_probs(np.array([prev]), np.array([token]))
        return float(np.exp(logp[0]))

    def _pair_log_probs(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        num = self.pair_count(prev, token) + self.k
        den = self.context_counts[prev] + self.k * self.vocab_size
        return _smoothed_log(num.astype(np.float64), den.astype(np.float64))


@dataclass(frozen=True, slots=True)
class UnigramLM(PositionScorer):
    """P(token), ignoring context; counts cover predicted positions only (never a first token)."""

    counts: np.ndarray
    """c(w): occurrences of w at predicted positions, shape [vocab_size]."""
    vocab_size: int
    """Number of token types V (the tokenizer's vocabulary size)."""
    k: float
    """Add-k smoothing constant; 0 gives maximum-likelihood estimates."""

    @classmethod
    def fit(
        cls, sequences: Iterable[Sequence[int] | np.ndarray], vocab_size: int, k: float = 1.0
    ) -> UnigramLM:
        return cls.from_bigram(BigramLM.fit(sequences, vocab_size, k=k))

    @classmethod
    def from_bigram(cls, bigram: BigramLM) -> UnigramLM:
        """The unigram model of the same training positions, without a second pass over the data."""
        next_tokens = bigram.pair_codes % bigram.vocab_size
        counts = np.bincount(next_tokens, weights=bigram.pair_counts, minlength=bigram.vocab_size)
        return cls(counts=counts.astype(np.int64), vocab_size=bigram.vocab_size, k=bigram.k)

    def prob(self, token: int) -> float:
        """P(token)."""
        ids = token_ids([token], self.vocab_size)
        return float(np.exp(self._pair_log_probs(ids, ids)[0]))

    def _pair_log_probs(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        """log P(token), whatever came before."""
        num = self.counts[token].astype(np.float64) + self.k
        den = np.full(token.shape, self.counts.sum() + self.k * self.vocab_size, dtype=np.float64)
        return _smoothed_log(num, den)


def with_leading_eot(
    documents: Iterable[Sequence[int] | np.ndarray], eot_id: int
) -> Iterator[np.ndarray]:
    """Each document preceded by the end-of-text token, so that its first token is predicted from
    EOT, as it is in the packed stream the transformer trains on."""
    for doc in documents:
        yield np.concatenate([[eot_id], np.asarray(doc, dtype=np.int64).reshape(-1)])


def fit_baselines(
    train: Iterable[Sequence[int] | np.ndarray], vocab_size: int, k: float = 1.0
) -> dict[str, PositionScorer]:
    """The add-k unigram and bigram and the Kneser-Ney trigram of `train` (two passes)."""
    train = list(train)
    bigram = BigramLM.fit(train, vocab_size, k=k)
    return {
        "unigram": UnigramLM.from_bigram(bigram),
        "bigram": bigram,
        "kn_trigram": KneserNeyTrigramLM.fit(train, vocab_size),
    }


def ngram_baselines(
    train: Iterable[Sequence[int] | np.ndarray],
    validation: Iterable[Sequence[int] | np.ndarray],
    vocab_size: int,
    k: float = 1.0,
) -> dict[str, float]:
    """Fit the three baselines on `train` and score `validation` with each."""
    validation = list(validation)
    stats: dict[str, float] = {}
    for name, model in fit_baselines(train, vocab_size, k).items():
        ce = model.cross_entropy(validation)
        stats[f"{name}_cross_entropy"] = ce
        stats[f"{name}_perplexity"] = perplexity(ce)
    return stats
