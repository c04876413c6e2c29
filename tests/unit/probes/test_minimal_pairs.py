"""Minimal-pair accuracy (F5): the share of pairs where the model prefers the acceptable one."""

import pytest

from lmforge.pipeline.probes.minimal_pairs import (
    MINIMAL_PAIRS,
    MinimalPair,
    minimal_pair_accuracy,
)


def test_builtin_pairs_hold_the_seed_pairs_and_at_least_twenty_more():
    seed = {(p.good, p.bad) for p in MINIMAL_PAIRS if p.phenomenon == "seed (F5)"}
    assert seed == {
        ("how old are you", "how old is you"),
        ("how old are you", "what age have you"),
        ("I have not a question", "I have a knot question"),
    }
    assert len(MINIMAL_PAIRS) - len(seed) >= 20


def test_builtin_pairs_are_distinct_and_each_pair_differs():
    assert len({(p.good, p.bad) for p in MINIMAL_PAIRS}) == len(MINIMAL_PAIRS)
    assert all(p.good != p.bad for p in MINIMAL_PAIRS)


def test_model_that_prefers_every_acceptable_sentence_scores_one():
    good = {p.good for p in MINIMAL_PAIRS}
    result = minimal_pair_accuracy(lambda texts: [0.0 if t in good else -5.0 for t in texts])
    assert result["accuracy"] == 1.0
    assert result["n_correct"] == result["n_pairs"] == len(MINIMAL_PAIRS)
    assert result["failed"] == []


def test_ties_count_as_failures():
    result = minimal_pair_accuracy(lambda texts: [-1.0] * len(texts))
    assert result["accuracy"] == 0.0
    assert len(result["failed"]) == len(MINIMAL_PAIRS)


def test_accuracy_is_reported_per_phenomenon_with_the_failed_pairs():
    pairs = [
        MinimalPair(good="a b", bad="a c", phenomenon="x"),
        MinimalPair(good="d e", bad="d f", phenomenon="x"),
        MinimalPair(good="g h", bad="g i", phenomenon="y"),
    ]
    logp = {"a b": -1.0, "a c": -2.0, "d e": -3.0, "d f": -2.5, "g h": -1.0, "g i": -9.0}
    calls = []

    def logprob_fn(texts):
        calls.append(list(texts))
        return [logp[t] for t in texts]

    result = minimal_pair_accuracy(logprob_fn, pairs)
    assert len(calls) == 1 and sorted(calls[0]) == sorted(logp)
    assert result["accuracy"] == pytest.approx(2 / 3)
    assert result["accuracy_by_phenomenon"] == {"x": 0.5, "y": 1.0}
    assert result["failed"] == [{"good": "d e", "bad": "d f", "logprob_gap": -0.5}]


def test_scorer_returning_the_wrong_number_of_scores_is_an_error():
    with pytest.raises(ValueError, match="returned 1 scores"):
        minimal_pair_accuracy(lambda texts: [0.0])
