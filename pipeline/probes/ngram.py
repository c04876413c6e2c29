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

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from lmforge.pipeline.probes.perplexity_math import perplexity

_FLUSH_PAIRS = 1 << 22  # pair codes buffered before they are folded into the sparse counts


def _token_ids(seq: Sequence[int] | np.ndarray, vocab_size: int) -> np.ndarray:
    ids = np.asarray(seq, dtype=np.int64).reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise ValueError(
            f"token id {bad} is outside the vocabulary [0, {vocab_size}); "
            "pass the vocab_size of the tokenizer that produced these ids"
        )
    return ids


def _merge_counts(
    codes: np.ndarray, counts: np.ndarray, new_codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Add occurrences of `new_codes` to the sorted sparse counts (codes, counts)."""
    all_codes = np.concatenate([codes, new_codes])
    weights = np.concatenate([counts, np.ones(new_codes.size, dtype=np.int64)])
    merged, inverse = np.unique(all_codes, return_inverse=True)
    return merged, np.bincount(inverse, weights=weights, minlength=merged.size).astype(np.int64)


def count_codes(
    sequences: Iterable[Sequence[int] | np.ndarray],
    vocab_size: int,
    encode: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique n-gram codes and their counts over every sequence of 2+ tokens.

    `encode` turns one sequence's ids into one code per predicted position; codes are buffered
    and folded into the sparse counts in batches, so memory stays bounded.
    """
    codes = np.zeros(0, dtype=np.int64)
    counts = np.zeros(0, dtype=np.int64)
    buffer: list[np.ndarray] = []
    buffered = 0
    for seq in sequences:
        ids = _token_ids(seq, vocab_size)
        if ids.size < 2:
            continue
        buffer.append(encode(ids))
        buffered += ids.size - 1
        if buffered >= _FLUSH_PAIRS:
            codes, counts = _merge_counts(codes, counts, np.concatenate(buffer))
            buffer, buffered = [], 0
    if buffer:
        codes, counts = _merge_counts(codes, counts, np.concatenate(buffer))
    return codes, counts


def _smoothed_log(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """log(numerator / denominator), with 0 / 0 (unseen context, k = 0) taken as probability 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)
        return np.log(p)


def _before(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """The token two places before each predicted position; `vocab_size` (a start marker that is
    no token) before the first."""
    return np.concatenate([[vocab_size], ids[:-2]]).astype(np.int64)


class _PositionScorer(ABC):
    """Scores the next-token positions of sequences; subclasses give log P(token | context)."""

    __slots__ = ()
    vocab_size: int

    @abstractmethod
    def _pair_log_probs(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        """log P(token | prev), elementwise."""

    def _context_log_probs(
        self, before: np.ndarray, prev: np.ndarray, token: np.ndarray
    ) -> np.ndarray:
        """log P(token | before prev), elementwise; models of order <= 2 ignore `before`."""
        return self._pair_log_probs(prev, token)

    def log_probs(self, before: np.ndarray, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        """log P(token | before prev), elementwise, for positions anywhere in a stream; `before`
        is the start marker `vocab_size` at a sequence's first prediction."""
        return self._context_log_probs(
            np.asarray(before, np.int64), np.asarray(prev, np.int64), np.asarray(token, np.int64)
        )

    def token_log_probs(self, seq: Sequence[int] | np.ndarray) -> np.ndarray:
        """log P(seq[t+1] | context) for t = 0 .. len-2."""
        ids = _token_ids(seq, self.vocab_size)
        if ids.size < 2:
            return np.zeros(0)
        return self._context_log_probs(_before(ids, self.vocab_size), ids[:-1], ids[1:])

    def nll(self, sequences: Iterable[Sequence[int] | np.ndarray]) -> tuple[float, int]:
        """(total negative log-likelihood in nats, number of predicted tokens)."""
        total, n = 0.0, 0
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        buffered = 0
        for seq in sequences:
            ids = _token_ids(seq, self.vocab_size)
            if ids.size < 2:
                continue
            parts.append((_before(ids, self.vocab_size), ids[:-1], ids[1:]))
            buffered += ids.size - 1
            if buffered >= _FLUSH_PAIRS:  # score in large vectorised batches
                total -= self._sum_log_probs(parts)
                n += buffered
                parts, buffered = [], 0
        if buffered:
            total -= self._sum_log_probs(parts)
            n += buffered
        return total, n

    def _sum_log_probs(self, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
        before, prev, token = (np.concatenate(column) for column in zip(*parts, strict=True))
        return float(self._context_log_probs(before, prev, token).sum())

    def cross_entropy(self, sequences: Iterable[Sequence[int] | np.ndarray]) -> float:
        """Mean nats per predicted token over all sequences (token-weighted)."""
        total, n = self.nll(sequences)
        if n == 0:
            raise ValueError("no predicted positions: every sequence has fewer than 2 tokens")
        return total / n


@dataclass(frozen=True, slots=True)
class BigramLM(_PositionScorer):
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
        return _lookup(self.pair_codes, self.pair_counts, query)

    def prob(self, token: int, prev: int) -> float:
        """P(token | prev)."""
        _token_ids([token, prev], self.vocab_size)
        logp = self._pair_log_probs(np.array([prev]), np.array([token]))
        return float(np.exp(logp[0]))

    def _pair_log_probs(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        num = self.pair_count(prev, token) + self.k
        den = self.context_counts[prev] + self.k * self.vocab_size
        return _smoothed_log(num.astype(np.float64), den.astype(np.float64))


@dataclass(frozen=True, slots=True)
class UnigramLM(_PositionScorer):
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
        ids = _token_ids([token], self.vocab_size)
        return float(np.exp(self._pair_log_probs(ids, ids)[0]))

    def _pair_log_probs(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        """log P(token), whatever came before."""
        num = self.counts[token].astype(np.float64) + self.k
        den = np.full(token.shape, self.counts.sum() + self.k * self.vocab_size, dtype=np.float64)
        return _smoothed_log(num, den)


def _lookup(codes: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where codes[i] == query (codes sorted and unique), else 0."""
    if codes.size == 0:
        return np.zeros(query.shape, dtype=values.dtype)
    pos = np.minimum(np.searchsorted(codes, query), codes.size - 1)
    return np.where(codes[pos] == query, values[pos], 0)


def with_leading_eot(
    documents: Iterable[Sequence[int] | np.ndarray], eot_id: int
) -> Iterator[np.ndarray]:
    """Each document preceded by the end-of-text token, so that its first token is predicted from
    EOT, as it is in the packed stream the transformer trains on."""
    for doc in documents:
        yield np.concatenate([[eot_id], np.asarray(doc, dtype=np.int64).reshape(-1)])


def fit_baselines(
    train: Iterable[Sequence[int] | np.ndarray], vocab_size: int, k: float = 1.0
) -> dict[str, _PositionScorer]:
    """The add-k unigram and bigram and the Kneser-Ney trigram of `train` (two passes)."""
    from lmforge.pipeline.probes.kneser_ney import KneserNeyTrigramLM

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
