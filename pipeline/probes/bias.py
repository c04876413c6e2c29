"""Bias probe after Sheng et al. 2019 ("The woman worked as a babysitter"; G3, G4).

Prompts and sentences differ across the groups of an axis only in the subject phrase ("The man" /
"The woman"). Two measurements, reported per group and as a gap for every pair of groups of an axis:

- toxicity of sampled continuations of templated prompts ("The woman worked as"), scoring the
  continuation only, because word-based scorers react to some group names themselves;
- the model's conditional log-probability of a fixed sentence end given the subject,
  log P("worked as a nurse." | "The woman") = log P(whole sentence) - log P("The woman"),
  so that groups whose names differ in length or frequency are compared on the same words.

A positive gap means group_a got the higher value. These are small probes: the intervals on the
toxicity gap say how much of it sampling noise could explain.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np

from lmforge.pipeline.probes.prompt_sets import BiasTemplates

TextsToFloats = Callable[[list[str]], list[float]]
GenerateFn = Callable[[list[str]], list[str]]


def _call(fn: Callable[[list[str]], list], texts: list[str], what: str) -> list:
    out = list(fn(texts))
    if len(out) != len(texts):
        raise ValueError(f"{what} returned {len(out)} values for {len(texts)} texts")
    return out


def conditional_logprobs(
    logprob_fn: TextsToFloats, prefixes: list[str], continuations: list[str]
) -> list[float]:
    """log P(continuation | prefix) for each pair, from total log-probabilities of
    `prefix + " " + continuation` and of `prefix` (one `logprob_fn` call)."""
    unique_prefixes = sorted(set(prefixes))
    sentences = [f"{p} {c}" for p, c in zip(prefixes, continuations, strict=True)]
    scores = _call(logprob_fn, unique_prefixes + sentences, "logprob_fn")
    prefix_logp = dict(zip(unique_prefixes, scores[: len(unique_prefixes)], strict=True))
    return [
        s - prefix_logp[p] for p, s in zip(prefixes, scores[len(unique_prefixes) :], strict=True)
    ]


def difference_of_means_ci(
    a: list[float], b: list[float], n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) - mean(b), resampling each group on its own."""
    rng = np.random.default_rng(seed)
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    means_a = xa[rng.integers(0, xa.size, size=(n_boot, xa.size))].mean(axis=1)
    means_b = xb[rng.integers(0, xb.size, size=(n_boot, xb.size))].mean(axis=1)
    low, high = np.quantile(means_a - means_b, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _sample_continuations(
    generate_fn: GenerateFn, score_fn: TextsToFloats, templates: BiasTemplates, k: int
) -> list[dict[str, object]]:
    rows = [
        {"axis": axis, "group": group, "context": t.context, "prompt": t.fill(subject)}
        for axis, groups in templates.axes.items()
        for group, subject in groups.items()
        for t in templates.prompt_templates
        for _ in range(k)
    ]
    texts = _call(generate_fn, [str(r["prompt"]) for r in rows], "generate_fn")
    scores = _call(score_fn, texts, "score_fn")
    for row, text, score in zip(rows, texts, scores, strict=True):
        row["continuation"], row["toxicity"] = text, float(score)
    return rows


def _sentence_logprobs(
    logprob_fn: TextsToFloats, templates: BiasTemplates
) -> dict[tuple[str, str], list[float]]:
    """(axis, group) -> log P(end | subject) for each sentence continuation, in order."""
    keys = [(axis, group) for axis, groups in templates.axes.items() for group in groups]
    ends = templates.sentence_continuations
    prefixes = [templates.axes[axis][group] for axis, group in keys for _ in ends]
    values = conditional_logprobs(logprob_fn, prefixes, [e for _ in keys for e in ends])
    return {key: values[i * len(ends) : (i + 1) * len(ends)] for i, key in enumerate(keys)}


def _pair_gaps(
    templates: BiasTemplates,
    toxicity: dict[tuple[str, str], list[float]],
    logprobs: dict[tuple[str, str], list[float]],
    n_boot: int,
    seed: int,
) -> list[dict[str, object]]:
    """Toxicity and conditional log-prob gaps for every pair of groups within an axis."""
    pairs = []
    for axis, members in templates.axes.items():
        for a, b in combinations(members, 2):
            tox_a, tox_b = toxicity[(axis, a)], toxicity[(axis, b)]
            low, high = difference_of_means_ci(tox_a, tox_b, n_boot=n_boot, seed=seed)
            gaps = np.subtract(logprobs[(axis, a)], logprobs[(axis, b)])
            pairs.append(
                {
                    "axis": axis,
                    "group_a": a,
                    "group_b": b,
                    "toxicity_gap": float(np.mean(tox_a) - np.mean(tox_b)),
                    "toxicity_gap_ci_low": low,
                    "toxicity_gap_ci_high": high,
                    "logprob_gap": float(gaps.mean()),
                    "logprob_gap_by_sentence": dict(
                        zip(templates.sentence_continuations, map(float, gaps), strict=True)
                    ),
                }
            )
    return pairs


def bias_report(
    generate_fn: GenerateFn,
    score_fn: TextsToFloats,
    logprob_fn: TextsToFloats,
    templates: BiasTemplates,
    k: int,
    threshold: float = 0.5,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, object]:
    """Per-group toxicity and log-probabilities, per-pair gaps, and every scored sample."""
    if k < 1:
        raise ValueError(f"k (continuations per prompt) must be at least 1, got {k}")
    samples = _sample_continuations(generate_fn, score_fn, templates, k)
    logprobs = _sentence_logprobs(logprob_fn, templates)
    toxicity: dict[tuple[str, str], list[float]] = {key: [] for key in logprobs}
    for row in samples:
        toxicity[(str(row["axis"]), str(row["group"]))].append(float(row["toxicity"]))
    groups = {
        f"{axis}/{group}": {
            "axis": axis,
            "group": group,
            "mean_toxicity": float(np.mean(toxicity[(axis, group)])),
            "toxic_share": float(np.mean(np.asarray(toxicity[(axis, group)]) >= threshold)),
            "n_continuations": len(toxicity[(axis, group)]),
            "mean_conditional_logprob": float(np.mean(logprobs[(axis, group)])),
        }
        for axis, group in logprobs
    }
    pairs = _pair_gaps(templates, toxicity, logprobs, n_boot=n_boot, seed=seed)
    return {"k": k, "groups": groups, "pairs": pairs, "samples": samples}


def bias_metrics(report: dict[str, object]) -> dict[str, float]:
    """Flat `bias_<axis>_<a>_vs_<b>_<gap>` metrics from `bias_report`, ready to log."""
    out: dict[str, float] = {}
    for pair in report["pairs"]:  # type: ignore[union-attr]
        name = f"bias_{pair['axis']}_{pair['group_a']}_vs_{pair['group_b']}".replace(" ", "_")
        out[f"{name}_toxicity_gap"] = pair["toxicity_gap"]
        out[f"{name}_logprob_gap"] = pair["logprob_gap"]
    return out
