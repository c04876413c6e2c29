"""A mixture's perplexity figures: each source's on its own, the mix's cross-entropy and bits
per byte weighted by the mixture's weights; the card's per-source rows and what it says when a
share drawn is more than a point from its weight or a source is repeated."""

from __future__ import annotations

import math

import pytest

from lmforge.pipeline.stages.perplexity.stage import mix_of
from lmforge.pipeline.stages.report.mixture_table import (
    SourceRow,
    drawn_over,
    mixture_rows,
    notes,
)


def figures(loss: float, bpb: float, tokens: int) -> dict:
    return {
        "val_loss": loss,
        "val_perplexity": math.exp(loss),
        "val_bits_per_byte": bpb,
        "unigram_cross_entropy": loss + 1,
        "val_tokens_scored": tokens,
        "val_scoring_s": 1.0,
    }


def test_the_mix_is_weighted_by_the_mixture_weights_not_by_tokens():
    mixed = mix_of({"a": figures(2.0, 1.0, 10), "b": figures(4.0, 3.0, 1000)}, {"a": 3, "b": 1})
    assert mixed["val_loss"] == pytest.approx(0.75 * 2 + 0.25 * 4)
    assert mixed["val_perplexity"] == pytest.approx(math.exp(2.5))
    assert mixed["val_bits_per_byte"] == pytest.approx(1.5)
    assert mixed["unigram_perplexity"] == pytest.approx(math.exp(3.5))
    assert mixed["val_tokens_scored"] == 1010
    assert mixed["sources"]["b"]["val_perplexity"] == pytest.approx(math.exp(4.0))
    assert mixed["mix_weights"] == {"a": 0.75, "b": 0.25}


def test_the_rows_join_each_sources_stages():
    rows = mixture_rows(
        {"a": {"docs_in": 10, "docs_out": 8}, "b": {"docs_in": 5, "docs_out": 5}},
        {"a": {"train_tokens": 100}, "b": {"train_tokens": 50}},
        {"sources": {"b": {"removed": 2}}},
        {"mixture": [
            {"source": "a", "weight": 1, "share_asked": 0.5, "share_drawn": 0.5, "epochs": 0.2},
            {"source": "b", "weight": 1, "share_asked": 0.5, "share_drawn": 0.5, "epochs": 3.0},
        ]},
    )  # fmt: skip
    assert [(r.source, r.docs_out, r.removed_across, r.train_tokens) for r in rows] == [
        ("a", 8, 0, 100),
        ("b", 3, 2, 50),
    ]
    said = notes(rows, 100)
    assert said == [
        "b is repeated: 3.00 epochs of its training windows, as its weight asks for more than "
        "it holds"
    ]


def test_a_share_more_than_a_point_off_its_weight_is_explained():
    row = SourceRow("a", 1, 1, 0, 1, 1.0, 0.5, 0.53, 0.1)
    (said,) = notes([row], 30)
    assert "a: drawn 0.530 for 0.500 asked" in said and "1/30" in said


def test_the_shares_drawn_are_over_the_positions_the_run_trained_on():
    parts = [
        {"source": "a", "weight": 0.7, "windows": 100, "share_drawn": 0.7},
        {"source": "b", "weight": 0.3, "windows": 10, "share_drawn": 0.3},
    ]
    index = {"mixture": parts, "run_positions": 1000}
    assert drawn_over(index, 1000) is index
    fewer = drawn_over(index, 7)
    assert [p["draws"] for p in fewer["mixture"]] == [5, 2]
    assert fewer["mixture"][1]["epochs"] == pytest.approx(0.2)
    assert fewer["run_positions"] == 7
