"""Diversity and repetition of sampled text: the "more boring and more repetitive" side of the
quality/diversity trade-off of decoding (E7).

A sample is a sequence of tokens: token ids from the tokenizer or words of the text (any hashable
items); compare decoding settings only with the same kind of tokens.

- distinct-n: unique n-grams / total n-grams, pooled over all samples of a setting (Li et al. 2016).
  Lower means the setting keeps producing the same phrases.
- repeated n-gram fraction of one sample: share of its n-grams that already occurred earlier in the
  same sample (0 for a sample with no repeat, near 1 for a sample looping on one phrase).
- repetition rate: share of samples with at least one repeated n-gram (default n = 4), i.e. with a
  repeated fraction above 0; the degenerate loops greedy decoding falls into.

Over the whitespace words of completions (`word_degeneracy`): the share of the most frequent word
of one completion (near 1 for "the the the ..."), the most occurrences of any word 4-gram in one
completion (a loop on one phrase), and distinct-2 over the pooled words of a setting's samples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

Tokens = Sequence[Hashable]


def ngrams(tokens: Tokens, n: int) -> list[tuple[Hashable, ...]]:
    """The n-grams of one sequence, in order (empty when it is shorter than n)."""
    if n < 1:
        raise ValueError(f"n-gram order must be at least 1, got {n}")
    items = list(tokens)
    return [tuple(items[i : i + n]) for i in range(len(items) - n + 1)]


def distinct_n(samples: Sequence[Tokens], n: int) -> float:
    """Unique n-grams / total n-grams over all samples; 0.0 when no sample has n tokens."""
    total = 0
    unique: set[tuple[Hashable, ...]] = set()
    for sample in samples:
        grams = ngrams(sample, n)
        total += len(grams)
        unique.update(grams)
    return len(unique) / total if total else 0.0


def repeated_ngram_fraction(tokens: Tokens, n: int = 4) -> float:
    """Share of the sample's n-grams that occurred earlier in it: 1 - unique / total."""
    grams = ngrams(tokens, n)
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def repetition_rate(samples: Sequence[Tokens], n: int = 4) -> float:
    """Share of samples that contain at least one repeated n-gram."""
    if not samples:
        raise ValueError("repetition_rate needs at least one sample")
    return sum(repeated_ngram_fraction(s, n) > 0 for s in samples) / len(samples)


def diversity_stats(samples: Sequence[Tokens], repeat_n: int = 4) -> dict[str, float]:
    """distinct-1, distinct-2, repetition rate and mean repeated fraction, ready to log."""
    if not samples:
        raise ValueError("diversity_stats needs at least one sample")
    fractions = [repeated_ngram_fraction(s, repeat_n) for s in samples]
    return {
        "distinct_1": distinct_n(samples, 1),
        "distinct_2": distinct_n(samples, 2),
        f"repetition_rate_{repeat_n}gram": sum(f > 0 for f in fractions) / len(samples),
        f"mean_repeated_{repeat_n}gram_fraction": sum(fractions) / len(samples),
        "mean_length": sum(len(s) for s in samples) / len(samples),
    }


def top_word_share(text: str) -> float:
    """Occurrences of the most frequent whitespace word / words of the text (0.0 when empty)."""
    words = text.split()
    return Counter(words).most_common(1)[0][1] / len(words) if words else 0.0


def max_ngram_count(tokens: Tokens, n: int = 4) -> int:
    """Occurrences of the most frequent n-gram of one sequence (0 when it is shorter than n)."""
    grams = Counter(ngrams(tokens, n))
    return grams.most_common(1)[0][1] if grams else 0


def word_degeneracy(texts: Sequence[str], repeat_n: int = 4) -> dict[str, float]:
    """Worst top-word share and worst n-gram count over the completions, and distinct-2 of their
    pooled whitespace words."""
    if not texts:
        raise ValueError("word_degeneracy needs at least one completion")
    words = [t.split() for t in texts]
    return {
        "max_top_word_share": max(top_word_share(t) for t in texts),
        f"max_word_{repeat_n}gram_count": float(max(max_ngram_count(w, repeat_n) for w in words)),
        "word_distinct_2": distinct_n(words, 2),
    }
