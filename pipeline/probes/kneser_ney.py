"""Interpolated Kneser-Ney trigram over token ids: the baseline a language-modelling reader knows
(Chen & Goodman 1998, "interpolated Kneser-Ney" with one discount per order).

It scores the same positions as the add-k models of `ngram`: token t+1 of every sequence from
tokens t-1 and t, where the token before the first is a start marker (id `vocab_size`, no token of
the vocabulary), so the first prediction of a sequence has a trigram context too.

    P3(w | u v) = max(c(u v w) - D3, 0) / c(u v .) + D3 N1+(u v .) / c(u v .) * P2(w | v)
    P2(w | v)   = max(N1+(. v w) - D2, 0) / N1+(. v .) + D2 N1+(v .) / N1+(. v .) * P1(w)
    P1(w)       = max(N1+(. w) - D1, 0) / N1+(. .) + D1 N1+(w: N1+(. w) > 0) / N1+(. .) / V

c counts occurrences; N1+(. v w) counts the distinct tokens u seen before "v w" (continuation
counts), N1+(v .) the distinct w after v among those, N1+(. w) the distinct v before w. A context
never seen falls back to the order below; P1 interpolates with the uniform 1/V, so an unseen token
keeps a floor and every P sums to exactly 1 over the vocabulary. Each discount is estimated from
the counts-of-counts of its order, D = n1 / (n1 + 2 n2) (0.75 when n1 or n2 is 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lmforge.pipeline.probes.position_scorer import (
    PositionScorer,
    count_codes,
    sparse_lookup,
    token_before,
)

DEFAULT_DISCOUNT = 0.75


def discount(counts: np.ndarray) -> float:
    """D = n1 / (n1 + 2 n2) from the counts-of-counts; DEFAULT_DISCOUNT when undefined."""
    n1, n2 = int((counts == 1).sum()), int((counts == 2).sum())
    return n1 / (n1 + 2 * n2) if n1 and n2 else DEFAULT_DISCOUNT


def _interpolate(
    count: np.ndarray, total: np.ndarray, types: np.ndarray, d: float, lower: np.ndarray
) -> np.ndarray:
    """max(count - d, 0) / total + d * types / total * lower, and `lower` where total == 0."""
    seen = total > 0
    safe = np.where(seen, total, 1).astype(np.float64)
    mixed = (np.maximum(count - d, 0.0) + d * types * lower) / safe
    return np.where(seen, mixed, lower)


@dataclass(frozen=True, slots=True)
class KneserNeyTrigramLM(PositionScorer):
    """Sparse trigram counts and the continuation counts of the lower orders."""

    trigram_codes: np.ndarray
    """Sorted unique codes (u * B + v) * B + w, B = vocab_size + 1 (u may be the start marker)."""
    trigram_counts: np.ndarray
    """c(u v w) of each code."""
    context_codes: np.ndarray
    """Sorted unique trigram contexts u * B + v."""
    context_counts: np.ndarray
    """c(u v .) of each context."""
    context_types: np.ndarray
    """N1+(u v .): distinct w after each context."""
    bigram_codes: np.ndarray
    """Sorted unique v * B + w of the bigrams seen inside a trigram."""
    bigram_continuations: np.ndarray
    """N1+(. v w) of each bigram."""
    unigram_continuations: np.ndarray
    """N1+(. w), shape [vocab_size]."""
    vocab_size: int
    """Number of token types V (the tokenizer's vocabulary size)."""
    discounts: tuple[float, float, float]
    """(D1, D2, D3) of the unigram, bigram and trigram orders."""

    @classmethod
    def fit(
        cls, sequences: Iterable[Sequence[int] | np.ndarray], vocab_size: int
    ) -> KneserNeyTrigramLM:
        """Count every trigram of every sequence (one pass, sparse counts)."""
        base = vocab_size + 1
        if base**3 >= 2**63:
            raise ValueError(f"vocab_size {vocab_size} is too large for int64 trigram codes")
        codes, counts = count_codes(
            sequences,
            vocab_size,
            lambda ids: (token_before(ids, vocab_size) * base + ids[:-1]) * base + ids[1:],
        )
        return cls.from_trigram_counts(codes, counts, vocab_size)

    @classmethod
    def from_trigram_counts(
        cls, codes: np.ndarray, counts: np.ndarray, vocab_size: int
    ) -> KneserNeyTrigramLM:
        """The model of sorted unique trigram codes and their counts."""
        base = vocab_size + 1
        contexts, first = np.unique(codes // base, return_index=True)
        context_counts = np.add.reduceat(counts, first) if codes.size else counts
        context_types = np.diff(np.append(first, codes.size))
        bigrams, continuations = np.unique(codes % (base * base), return_counts=True)
        unigram = np.bincount(bigrams % base, minlength=base)[:vocab_size]
        return cls(
            trigram_codes=codes,
            trigram_counts=counts,
            context_codes=contexts,
            context_counts=context_counts.astype(np.int64),
            context_types=context_types.astype(np.int64),
            bigram_codes=bigrams,
            bigram_continuations=continuations.astype(np.int64),
            unigram_continuations=unigram.astype(np.int64),
            vocab_size=vocab_size,
            discounts=(discount(unigram[unigram > 0]), discount(continuations), discount(counts)),
        )

    def _unigram(self, token: np.ndarray) -> np.ndarray:
        cont = self.unigram_continuations
        total = np.full(token.shape, cont.sum())
        types = np.full(token.shape, np.count_nonzero(cont))
        uniform = np.full(token.shape, 1.0 / self.vocab_size)
        return _interpolate(cont[token], total, types, self.discounts[0], uniform)

    def _bigram(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        base = self.vocab_size + 1
        cont = sparse_lookup(self.bigram_codes, self.bigram_continuations, prev * base + token)
        by_prev = self.bigram_codes // base
        total = np.bincount(by_prev, weights=self.bigram_continuations, minlength=base)[prev]
        types = np.bincount(by_prev, minlength=base)[prev]
        return _interpolate(cont, total, types, self.discounts[1], self._unigram(token))

    def _pair_log_probs(self, prev: np.ndarray, token: np.ndarray) -> np.ndarray:
        """log P2(token | prev): the bigram order alone."""
        return np.log(self._bigram(prev, token))

    def _context_log_probs(
        self, before: np.ndarray, prev: np.ndarray, token: np.ndarray
    ) -> np.ndarray:
        base = self.vocab_size + 1
        context = before * base + prev
        count = sparse_lookup(self.trigram_codes, self.trigram_counts, context * base + token)
        total = sparse_lookup(self.context_codes, self.context_counts, context)
        types = sparse_lookup(self.context_codes, self.context_types, context)
        p = _interpolate(count, total, types, self.discounts[2], self._bigram(prev, token))
        return np.log(p)
