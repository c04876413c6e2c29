"""The sums perplexity is made of, computed range by range of a token stream and combined.

Scoring a long stream is split into ranges of positions (one actor call each). A range returns
`RangeSums`: per scorer (the model, each n-gram baseline, the freshly initialised model) the
summed negative log-likelihood and the number of predicted tokens, the UTF-8 bytes of the
predicted tokens, and per document group the summed losses and tokens that a bootstrap over
documents needs. `StreamSums` adds them up in range order, so every figure is the same sum in
the same order whichever process scored which range: one actor or many give equal results.

Documents are pooled into at most `max_groups` contiguous groups (`document_groups`): memory and
the bootstrap's work stay bounded by that setting whatever the number of documents, and while
the split has no more documents than that, each group is one document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


def document_groups(docs: np.ndarray, n_docs: int, max_groups: int) -> np.ndarray:
    """Group of each document index in `docs`: runs of consecutive documents, `n_groups` runs."""
    n = n_groups(n_docs, max_groups)
    return np.asarray(docs, dtype=np.int64) * n // max(n_docs, 1)


def n_groups(n_docs: int, max_groups: int) -> int:
    """How many document groups a stream of `n_docs` documents has."""
    if max_groups < 1:
        raise ValueError(f"max_groups must be >= 1, got {max_groups}")
    return max(1, min(n_docs, max_groups))


@dataclass(slots=True)
class RangeSums:
    """Sums over the positions that one range of a stream predicts."""

    index: int
    """The range's place in the stream (0, 1, ...): the order of combination."""
    bytes: int
    """UTF-8 bytes of the predicted tokens."""
    totals: dict[str, tuple[float, int]]
    """Per scorer: (summed NLL in nats, predicted tokens)."""
    first_group: int = 0
    """Document group of `group_tokens[0]`."""
    group_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Predicted tokens per document group, from `first_group`."""
    group_nll: dict[str, np.ndarray] = field(default_factory=dict)
    """Per scorer with an interval: summed NLL per document group, from `first_group`."""


def range_sums(
    index: int,
    grouped: Mapping[str, np.ndarray],
    groups: np.ndarray,
    n_bytes: int,
    ungrouped: Mapping[str, np.ndarray] | None = None,
) -> RangeSums:
    """Sums of per-position losses: `grouped` scorers' losses align with `groups` (each
    position's document group, ascending); `ungrouped` scorers are only totalled."""
    groups = np.asarray(groups, dtype=np.int64)
    first = int(groups[0]) if groups.size else 0
    local = groups - first
    width = int(local[-1]) + 1 if groups.size else 0
    totals = {}
    group_nll = {}
    for name, losses in grouped.items():
        losses = np.asarray(losses, dtype=np.float64)
        if losses.shape != groups.shape:
            raise ValueError(f"{name}: {losses.size} losses for {groups.size} positions")
        totals[name] = (float(losses.sum()), int(losses.size))
        group_nll[name] = np.bincount(local, weights=losses, minlength=width)
    for name, losses in (ungrouped or {}).items():
        totals[name] = (float(np.sum(losses, dtype=np.float64)), int(np.size(losses)))
    tokens = np.bincount(local, minlength=width).astype(np.int64)
    return RangeSums(index, int(n_bytes), totals, first, tokens, group_nll)


class StreamSums:
    """The ranges of one stream added up in range order."""

    def __init__(self, n_groups: int) -> None:
        self.next_index = 0
        self.bytes = 0
        self.totals: dict[str, tuple[float, int]] = {}
        self.group_tokens = np.zeros(n_groups, dtype=np.int64)
        self.group_nll: dict[str, np.ndarray] = {}

    def add(self, part: RangeSums) -> None:
        """Add the next range; ranges come in order (0, 1, ...), or the sums would depend on who
        finished first."""
        if part.index != self.next_index:
            raise ValueError(f"range {part.index} added where range {self.next_index} is due")
        self.next_index += 1
        self.bytes += part.bytes
        for name, (nll, n) in part.totals.items():
            total, count = self.totals.get(name, (0.0, 0))
            self.totals[name] = (total + nll, count + n)
        end = part.first_group + part.group_tokens.size
        if end > self.group_tokens.size:
            raise ValueError(f"range {part.index} reaches group {end - 1} beyond the last")
        self.group_tokens[part.first_group : end] += part.group_tokens
        for name, values in part.group_nll.items():
            sums = self.group_nll.setdefault(name, np.zeros(self.group_tokens.size))
            sums[part.first_group : end] += values

    def mean_nll(self, name: str) -> float:
        """Summed NLL / predicted tokens of scorer `name`."""
        total, count = self.totals.get(name, (0.0, 0))
        if count == 0:
            raise ValueError(f"no position was scored by {name!r}")
        return total / count

    def by_group(self, *names: str) -> tuple[np.ndarray, ...]:
        """(NLL per group of each scorer in `names`, ..., tokens per group), no empty group."""
        keep = self.group_tokens > 0
        return (*(self.group_nll[name][keep] for name in names), self.group_tokens[keep])
