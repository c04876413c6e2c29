"""Minimal pairs as a sanity probe: how often the model gives the acceptable sentence of a pair the
higher total log-probability (F5, after the seed's "P(how old are you) > P(how old is you)").

The first three pairs are the seed's own (004 "Probabilistic Language model"); the others were
written for lmforge, in the plain English of software documentation, each changing one thing.
Sentences are compared by total log-probability, so a pair whose sentences differ in length (as two
of the seed's do) also measures the cost of the extra tokens; most pairs differ in one word.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

LogProbFn = Callable[[list[str]], list[float]]
"""Total log-probability (natural log) of each text, in order."""


@dataclass(frozen=True, slots=True)
class MinimalPair:
    """Two sentences that differ minimally; the model should prefer `good`."""

    good: str
    """The acceptable sentence."""
    bad: str
    """The unacceptable (or less probable) sentence."""
    phenomenon: str
    """What the pair tests, e.g. "subject-verb agreement"."""


def _pairs(phenomenon: str, *pairs: tuple[str, str]) -> list[MinimalPair]:
    return [MinimalPair(good=g, bad=b, phenomenon=phenomenon) for g, b in pairs]


MINIMAL_PAIRS: tuple[MinimalPair, ...] = tuple(
    _pairs(
        "seed (F5)",
        ("how old are you", "how old is you"),
        ("how old are you", "what age have you"),
        ("I have not a question", "I have a knot question"),
    )
    + _pairs(
        "subject-verb agreement",
        ("The function returns a list.", "The function return a list."),
        ("These functions return a list.", "These functions returns a list."),
        ("The keys of the dictionary are strings.", "The keys of the dictionary is strings."),
        ("She writes the tests before the code.", "She write the tests before the code."),
        ("The files in the folder were deleted.", "The files in the folder was deleted."),
    )
    + _pairs(
        "determiner-noun agreement",
        ("This example shows how to open a file.", "These example shows how to open a file."),
        ("Those values are ignored.", "That values are ignored."),
        ("Each argument is optional.", "Each arguments is optional."),
        ("There are two options.", "There are two option."),
    )
    + _pairs(
        "indefinite article",
        ("It raises an error if the file is missing.", "It raises a error if the file is missing."),
        ("Pass a string as the first argument.", "Pass an string as the first argument."),
    )
    + _pairs(
        "pronoun case",
        ("He gave the book to her.", "He gave the book to she."),
        ("They asked us to wait.", "Them asked us to wait."),
    )
    + _pairs(
        "irregular past tense",
        ("Yesterday she wrote a letter.", "Yesterday she writed a letter."),
        ("The children went to school.", "The children goed to school."),
    )
    + _pairs(
        "verb form after an auxiliary",
        ("The test did not pass.", "The test did not passed."),
        ("You can use a loop here.", "You can to use a loop here."),
        (
            "If the value is missing, the default is used.",
            "If the value is missing, the default is use.",
        ),
    )
    + _pairs(
        "word order",
        ("The module is imported only once.", "The module imported is only once."),
        ("She always checks the logs.", "She checks always the logs."),
    )
    + _pairs(
        "reflexive agreement",
        ("The students prepared themselves.", "The students prepared himself."),
    )
    + _pairs(
        "comparative",
        ("This method is faster than that one.", "This method is more faster than that one."),
    )
    + _pairs(
        "negative polarity item",
        ("Nobody has ever seen it.", "Somebody has ever seen it."),
    )
)


def pair_margins(
    logprob_fn: LogProbFn, pairs: Sequence[MinimalPair] = MINIMAL_PAIRS
) -> list[float]:
    """log P(good) - log P(bad) of each pair, in order; one call of `logprob_fn` on all texts."""
    texts = [p.good for p in pairs] + [p.bad for p in pairs]
    scores = list(logprob_fn(texts))
    if len(scores) != len(texts):
        raise ValueError(f"logprob_fn returned {len(scores)} scores for {len(texts)} texts")
    return [
        good - bad for good, bad in zip(scores[: len(pairs)], scores[len(pairs) :], strict=True)
    ]


def minimal_pair_accuracy(
    logprob_fn: LogProbFn, pairs: Sequence[MinimalPair] = MINIMAL_PAIRS
) -> dict[str, object]:
    """Share of pairs where log P(good) > log P(bad) (a tie counts as a failure), overall and by
    phenomenon, with the pairs the model got wrong. Calls `logprob_fn` once, on all sentences."""
    if not pairs:
        raise ValueError("minimal_pair_accuracy needs at least one pair")
    margins = pair_margins(logprob_fn, pairs)
    correct = [m > 0 for m in margins]
    by_phenomenon: dict[str, list[bool]] = {}
    for pair, ok in zip(pairs, correct, strict=True):
        by_phenomenon.setdefault(pair.phenomenon, []).append(ok)
    return {
        "accuracy": sum(correct) / len(pairs),
        "n_pairs": len(pairs),
        "n_correct": sum(correct),
        "accuracy_by_phenomenon": {k: sum(v) / len(v) for k, v in by_phenomenon.items()},
        "failed": [
            {"good": p.good, "bad": p.bad, "logprob_gap": m}
            for p, ok, m in zip(pairs, correct, margins, strict=True)
            if not ok
        ],
    }
