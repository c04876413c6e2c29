"""Minimal-pair margins: good minus bad in pair order, the counts by margin, and a real model's
margins agreeing with the perplexity stage's accuracy and failed pairs."""

from __future__ import annotations

import pytest
from bench_modules import load_bench
from logged_model import write_tiny_model

from lmforge.pipeline.evaluation.trained_model import TrainedModel
from lmforge.pipeline.probes.minimal_pairs import (
    MINIMAL_PAIRS,
    MinimalPair,
    minimal_pair_accuracy,
    pair_margins,
)

bench = load_bench("minimal_pair_margins")

PAIRS = [MinimalPair(good=f"good {i}", bad=f"bad {i}", phenomenon="test") for i in range(5)]


def test_margins_are_good_minus_bad_in_pair_order_from_one_call():
    scores = {"good 0": -3.0, "bad 0": -5.0, "good 1": -2.0, "bad 1": -1.5, "good 2": -4.0}
    scores.update({"bad 2": -4.0, "good 3": -1.0, "bad 3": -9.0, "good 4": -7.0, "bad 4": -6.0})
    calls = []

    def logprobs(texts):
        calls.append(list(texts))
        return [scores[t] for t in texts]

    assert pair_margins(logprobs, PAIRS) == [2.0, -0.5, 0.0, 8.0, -1.0]
    assert len(calls) == 1 and len(calls[0]) == 10
    with pytest.raises(ValueError, match="returned 3 scores for 10 texts"):
        pair_margins(lambda texts: [0.0] * 3, PAIRS)


def test_counts_split_pairs_by_margin_and_a_tie_is_not_right():
    counts = bench.margin_counts([2.0, 0.5, 0.0, -0.3, -1.5], PAIRS, tie=1.0)
    assert counts["right"] == 2  # 0.0 is a tie: the bar counts it as a failure
    assert counts["pairs"] == 5
    assert counts["sure_right"] == 1 and counts["sure_wrong"] == 1
    assert counts["near_ties"] == ["good 1", "good 2", "good 3"]
    wider = bench.margin_counts([2.0, 0.5, 0.0, -0.3, -1.5], PAIRS, tie=2.0)
    assert wider["sure_right"] == wider["sure_wrong"] == 0 and len(wider["near_ties"]) == 5
    with pytest.raises(ValueError, match="4 margins for 5 pairs"):
        bench.margin_counts([1.0] * 4, PAIRS)


def test_a_model_s_margins_agree_with_the_perplexity_stage_s_accuracy(tmp_path):
    """The bench scores the frozen pairs as the stage does (`minimal_pair_accuracy` over the
    trained model's log-probabilities): the same count right, the same gaps where it fails."""
    pretrain, tokenizer = write_tiny_model(tmp_path)
    artifacts = {"pretrain": pretrain, "train_tokenizer": tokenizer}

    margins = bench.model_margins(artifacts)
    stage = minimal_pair_accuracy(
        TrainedModel(artifacts["pretrain"], artifacts["train_tokenizer"]).logprobs
    )
    counts = bench.margin_counts(margins)
    assert len(margins) == len(MINIMAL_PAIRS)
    assert counts["right"] == stage["n_correct"]
    assert 0 < counts["right"] < len(MINIMAL_PAIRS)  # a random model gets some pairs each way
    failed = [m for m in margins if m <= 0]
    assert failed == pytest.approx([f["logprob_gap"] for f in stage["failed"]], abs=1e-4)
