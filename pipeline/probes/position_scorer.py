"""What the n-gram baselines share: the positions they score (token t+1 of every sequence from
its context), the base class that scores them, and sparse counts of n-gram codes.

`ngram` (add-k unigram and bigram) and `kneser_ney` (the interpolated Kneser-Ney trigram) both
build on it; neither imports the other's internals.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence

import numpy as np

_FLUSH_PAIRS = 1 << 22  # codes buffered before they are folded into the sparse counts


def token_ids(seq: Sequence[int] | np.ndarray, vocab_size: int) -> np.ndarray:
    """`seq` as int64 ids, each checked to be in the vocabulary (a clear error otherwise)."""
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
        ids = token_ids(seq, vocab_size)
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


def sparse_lookup(codes: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[i] where codes[i] == query (codes sorted and unique), else 0."""
    if codes.size == 0:
        return np.zeros(query.shape, dtype=values.dtype)
    pos = np.minimum(np.searchsorted(codes, query), codes.size - 1)
    return np.where(codes[pos] == query, values[pos], 0)


def token_before(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """The token two places before each predicted position; `vocab_size` (a start marker that is
    no token) before the first."""
    return np.concatenate([[vocab_size], ids[:-2]]).astype(np.int64)


class PositionScorer(ABC):
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
        ids = token_ids(seq, self.vocab_size)
        if ids.size < 2:
            return np.zeros(0)
        return self._context_log_probs(token_before(ids, self.vocab_size), ids[:-1], ids[1:])

    def nll(self, sequences: Iterable[Sequence[int] | np.ndarray]) -> tuple[float, int]:
        """(total negative log-likelihood in nats, number of predicted tokens)."""
        total, n = 0.0, 0
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        buffered = 0
        for seq in sequences:
            ids = token_ids(seq, self.vocab_size)
            if ids.size < 2:
                continue
            parts.append((token_before(ids, self.vocab_size), ids[:-1], ids[1:]))
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
