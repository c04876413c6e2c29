"""The model card opens with the answer: a verdict against each baseline from the model's 95%
interval, the model/baseline ratio, three greedy completions and what the figures do not show."""

import pytest

from lmforge.pipeline.stages.report.card_summary import (
    BaselineComparison,
    baseline_comparisons,
    headline,
    summary_sections,
)
from lmforge.pipeline.stages.report.model_card import to_markdown


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (0.8, 0.95, "beats"),
        (0.9, 1.1, "not distinguishable"),
        (1.0, 1.2, "does not beat"),
        (1.05, 1.2, "does not beat"),
    ],
)
def test_the_verdict_depends_on_where_the_ratio_interval_lies(low, high, verdict):
    assert BaselineComparison("bigram", 100.0, 0.9, low, high).verdict == verdict


PPL = {
    "val_perplexity": 80.0,
    "val_perplexity_ci_low": 74.0,
    "val_perplexity_ci_high": 87.0,
    "val_tokens_scored": 26000,
    "val_documents_scored": 90,
    "minimal_pair_accuracy": 0.7,
    "unigram_perplexity": 570.0,
    "bigram_perplexity": 160.0,
    "kn_trigram_perplexity": 84.0,
    "kn_trigram_ratio_ci_low": 0.93,
    "kn_trigram_ratio_ci_high": 0.97,
}


def test_every_reported_baseline_gets_a_comparison():
    comparisons = {c.name: c for c in baseline_comparisons(PPL)}
    assert comparisons["add-k unigram"].verdict == "beats"
    assert comparisons["add-k bigram"].ratio == pytest.approx(0.5)
    # the paired interval decides where the stage gave one, not the model's own interval
    assert comparisons["interpolated Kneser-Ney trigram"].verdict == "beats"
    without_paired = {k: v for k, v in PPL.items() if "ratio" not in k}
    kn = {c.name: c for c in baseline_comparisons(without_paired)}[
        "interpolated Kneser-Ney trigram"
    ]
    assert kn.verdict == "not distinguishable"  # 74 to 87 against 84
    assert kn.against == "not distinguishable from"
    assert comparisons["add-k unigram"].against == "beats"
    without_kn = {k: v for k, v in PPL.items() if not k.startswith("kn_")}
    assert len(baseline_comparisons(without_kn)) == 2  # a card from before the KN baseline


def test_the_card_opens_with_verdicts_three_greedy_completions_and_caveats():
    samples = [{"mode": "top_p", "prompt": "p0", "completion": "sampled"}] + [
        {"mode": "greedy", "prompt": f"p{i}", "completion": f"text {i}"} for i in range(4)
    ]
    stats = {"greedy_max_top_word_share": 0.25, "top_p_word_distinct_2": 0.8}
    sections = summary_sections(PPL, stats, samples)
    card = to_markdown("card", sections)
    assert card.index("How the model compares") < card.index("Three completions")
    assert "74.0 to 87.0" in card and "90 documents" in card
    assert (
        "beats the add-k bigram: its perplexity 160.0, model/baseline 0.50 (95% interval 0.46"
        in card
    )
    completions = sections[1].bullets
    assert completions == ["p0 → 'text 0'", "p1 → 'text 1'", "p2 → 'text 2'"]
    assert ("distinct-2 over the pooled words of the top-p completions", "0.8") in sections[1].table
    assert len(sections[2].bullets) >= 4


def test_a_model_trained_with_unlikelihood_says_so_above_its_completions():
    samples = [{"mode": "greedy", "prompt": "p", "completion": "text"}]
    plain = summary_sections(PPL, {}, samples)
    assert plain[1].paragraphs == []
    card = to_markdown("card", summary_sections(PPL, {}, samples, train={"unlikelihood": 0.5}))
    note = card.index("token-level unlikelihood term (weight 0.5")
    assert card.index("Three completions") < note < card.index("p → 'text'")
    assert "sequence-level" not in card
    train = {"sequence_unlikelihood": 1.0, "sequence_unlikelihood_steps": 200}
    card = to_markdown("card", summary_sections(PPL, {}, samples, train=train))
    note = card.index("Its last 200 training steps added a sequence-level unlikelihood term")
    assert card.index("Three completions") < note < card.index("p → 'text'")
    assert "token-level" not in card
    every = {**train, "sequence_unlikelihood_every": 2}
    card = to_markdown("card", summary_sections(PPL, {}, samples, train=every))
    assert "One in 2 of its last 200 training steps added a sequence-level" in card


def test_the_headline_gives_the_figures_the_verdicts_and_one_greedy_completion_in_lines():
    samples = [
        {"mode": "top_p", "prompt": "p0", "completion": "sampled"},
        {"mode": "greedy", "prompt": "A list\nis", "completion": " a list\n\n\tof " + "x" * 200},
    ]
    lines = headline(PPL, samples)
    assert lines[0] == "val perplexity 80.0 (95% interval 74.0-87.0), minimal-pair accuracy 0.70"
    assert lines[1] == (
        "beats the add-k unigram (570.0); beats the add-k bigram (160.0); "
        "beats the interpolated Kneser-Ney trigram (84.0)"
    )
    assert lines[2].startswith("greedy: A list is -> a list of xxx") and lines[2].endswith("...")
    assert len(lines[2]) == len("greedy: A list is -> ") + 100
    assert all("\n" not in line and "\t" not in line for line in lines)
    blank = headline(PPL, [{"mode": "greedy", "prompt": "p", "completion": "\n\n"}])
    assert blank[2] == "greedy: p -> (whitespace only)"
    bare = headline({"val_perplexity": 80.0}, [])  # a stage without intervals or baselines
    assert bare == ["val perplexity 80.0"]
