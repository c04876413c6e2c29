"""The opening of the model card: how the model compares with each baseline, three completions,
and what the figures do not show; built from the perplexity and sample stages' summaries. Its
`headline` is the same answer in a few terminal lines, which `lmforge run` prints at the end."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lmforge.pipeline.stages.report.model_card import Section

BASELINES = (
    ("unigram", "add-k unigram"),
    ("bigram", "add-k bigram"),
    ("kn_trigram", "interpolated Kneser-Ney trigram"),
)

NOT_SHOWN = [
    "Perplexity is per token of this tokenizer: it compares only models that share it (bits per "
    "byte compares across tokenizers).",
    "The validation split is held-out documents of the training corpus: the figures measure fit "
    "to that kind of text, not general language ability or usefulness on any task.",
    "The intervals cover the choice of validation documents only (the ratios' are paired: model "
    "and baseline on the same resampled documents), not the spread across training seeds or "
    "data orders.",
    "The completions answer a handful of prompts; the degeneracy figures screen for loops and "
    "repeated words, not for fluency, correctness or truthfulness.",
    "Minimal-pair accuracy rests on a small fixed set of pairs: one pair moves it by several "
    "points.",
]


@dataclass(frozen=True, slots=True)
class BaselineComparison:
    """The model's validation perplexity against one baseline's."""

    name: str
    baseline: float
    """The baseline's validation perplexity."""
    ratio: float
    """Model perplexity / baseline perplexity (below 1: the model is better)."""
    low: float
    """Lower end of the 95% interval of the ratio."""
    high: float
    """Upper end of the 95% interval of the ratio."""

    @property
    def verdict(self) -> str:
        """'beats' (whole interval below 1), 'does not beat' (whole interval at or above 1) or
        'not distinguishable' (the interval holds 1)."""
        if self.high < 1:
            return "beats"
        return "does not beat" if self.low >= 1 else "not distinguishable"

    @property
    def against(self) -> str:
        """The verdict as the start of a sentence that names the baseline next."""
        return "not distinguishable from" if self.verdict == "not distinguishable" else self.verdict


def baseline_comparisons(ppl: dict) -> list[BaselineComparison]:
    """One comparison per baseline the perplexity stage reported: the paired interval of the
    ratio when given, else the model's own interval divided by the baseline's figure."""
    model = ppl["val_perplexity"]
    comparisons = []
    for key, label in BASELINES:
        baseline = ppl.get(f"{key}_perplexity")
        if baseline is None:
            continue
        low = ppl.get(f"{key}_ratio_ci_low", ppl.get("val_perplexity_ci_low", model) / baseline)
        high = ppl.get(f"{key}_ratio_ci_high", ppl.get("val_perplexity_ci_high", model) / baseline)
        comparisons.append(BaselineComparison(label, baseline, model / baseline, low, high))
    return comparisons


def objective_note(train: Mapping[str, Any]) -> list[str]:
    """What a model trained with an unlikelihood term was trained on, from the pretrain stage's
    `train` config (nothing for cross-entropy alone)."""
    token = float(train.get("unlikelihood", 0.0))
    sequence = float(train.get("sequence_unlikelihood", 0.0))
    notes = []
    if token > 0:
        notes.append(
            f"Trained on cross-entropy plus a token-level unlikelihood term (weight {token:g}, "
            "`train.unlikelihood`) that lowers the probability of repeating tokens of the "
            "context: it trades a little perplexity for fewer greedy loops."
        )
    if sequence > 0:
        every = int(train.get("sequence_unlikelihood_every") or 1)
        steps = f"last {train.get('sequence_unlikelihood_steps')} training steps"
        which = f"Its {steps}" if every == 1 else f"One in {every} of its {steps}"
        notes.append(
            f"{which} added a "
            f"sequence-level unlikelihood term (weight {sequence:g}, "
            "`train.sequence_unlikelihood`): the model continued prefixes of training text "
            "greedily and the tokens of the 4-grams it repeated were made less likely, so its "
            "greedy completions loop less than cross-entropy alone leaves them."
        )
    if notes:
        notes.append(
            "The perplexity above scores the model's next-token probabilities as for any model; "
            "the unlikelihood terms are not part of it."
        )
    return notes


def summary_sections(
    ppl: dict, sample_stats: dict, samples: list[dict], train: Mapping[str, Any] | None = None
) -> list[Section]:
    """The card's opening: verdicts against the baselines, three completions, what is not shown.

    train: the pretrain stage's `train` config; its unlikelihood terms are named above the
    completions."""
    model = ppl["val_perplexity"]
    interval = ""
    if "val_perplexity_ci_low" in ppl:
        interval = (
            f" (95% interval {ppl['val_perplexity_ci_low']:.1f} to "
            f"{ppl['val_perplexity_ci_high']:.1f}, bootstrap over "
            f"{ppl.get('val_documents_scored', '?')} documents)"
        )
    opening = (
        f"Validation perplexity {model:.1f}{interval} over {ppl.get('val_tokens_scored', '?')} "
        f"tokens; minimal-pair accuracy {ppl.get('minimal_pair_accuracy', float('nan')):.2f}. "
        "Against the baselines (same tokenizer, same validation tokens):"
    )
    verdicts = [
        f"{c.against} the {c.name}: its perplexity {c.baseline:.1f}, model/baseline "
        f"{c.ratio:.2f} (95% interval {c.low:.2f} to {c.high:.2f})"
        for c in baseline_comparisons(ppl)
    ]
    greedy = _greedy(samples)
    degeneracy = [
        ("largest share of one word in a greedy completion", "greedy_max_top_word_share"),
        (
            "most occurrences of one word 4-gram in a greedy completion",
            "greedy_max_word_4gram_count",
        ),
        ("distinct-2 over the pooled words of the top-p completions", "top_p_word_distinct_2"),
    ]
    return [
        Section("How the model compares", paragraphs=[opening], bullets=verdicts),
        Section(
            "Three completions (greedy)",
            paragraphs=objective_note(train or {}),
            bullets=[f"{s['prompt']} → {s['completion']!r}" for s in greedy[:3]],
            table=[
                (label, f"{sample_stats[k]:.3g}") for label, k in degeneracy if k in sample_stats
            ],
        ),
        Section("What these figures do not show", bullets=NOT_SHOWN),
    ]


HEADLINE_COMPLETION_CHARS = 100
"""A greedy completion in the headline is cut to this many characters."""


def headline(ppl: dict, samples: list[dict]) -> list[str]:
    """The card's answer in at most three plain-text lines: the model's figures, its verdict
    against each baseline, and its first greedy completion on one line."""
    interval = ""
    if "val_perplexity_ci_low" in ppl:
        interval = (
            f" (95% interval {ppl['val_perplexity_ci_low']:.1f}-"
            f"{ppl['val_perplexity_ci_high']:.1f})"
        )
    figures = f"val perplexity {ppl['val_perplexity']:.1f}{interval}"
    if "minimal_pair_accuracy" in ppl:
        figures += f", minimal-pair accuracy {ppl['minimal_pair_accuracy']:.2f}"
    lines = [figures]
    verdicts = [f"{c.against} the {c.name} ({c.baseline:.1f})" for c in baseline_comparisons(ppl)]
    if verdicts:
        lines.append("; ".join(verdicts))
    greedy = _greedy(samples)
    if greedy:
        text = _one_line(greedy[0]["completion"]) or "(whitespace only)"
        if len(text) > HEADLINE_COMPLETION_CHARS:
            text = text[: HEADLINE_COMPLETION_CHARS - 3].rstrip() + "..."
        lines.append(f"greedy: {_one_line(greedy[0]['prompt'])} -> {text}")
    return lines


def _greedy(samples: list[dict]) -> list[dict]:
    """The greedy completions among `samples` (all of them when none is marked greedy)."""
    return [s for s in samples if s.get("mode") == "greedy"] or samples


def _one_line(text: str) -> str:
    """`text` with every run of whitespace or unprintable characters as one space."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
