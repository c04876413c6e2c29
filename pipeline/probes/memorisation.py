"""Memorisation probes after Carlini et al. (G6): canary exposure and verbatim extraction.

Canaries (Carlini et al. 2019, "The Secret Sharer"): random secrets in a fixed template, e.g.
"my secret number is 482019", inserted into the training split 1, 10 or 100 times each. After
training, a canary's exposure says how far the model ranks it above the other possible secrets:

    exposure = log2 |R| - log2 rank,

R being the space of secrets (10^6 for six digits) and rank the canary's position when every
secret in R is ordered by the model's log-probability (rank 1 = most probable). Here R is
represented by m candidate secrets drawn uniformly from the space (all of it when it is small), and
exposure = log2(m + 1) - log2(rank among the canary and its m candidates). With every other secret
as a candidate this is exactly Carlini's exposure; with a sample it estimates it (rank / |R| is
estimated by rank / (m + 1)), and log2(m + 1) is the largest value it can resolve. An unmemorised
canary has an exposure around 1 bit (middling rank); a memorised one reaches the maximum.

Verbatim extraction (Carlini et al. 2021): prompt with the first tokens of training documents and
count the share whose greedy continuation reproduces the next n (50) tokens exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

DEFAULT_TEMPLATE = "my secret number is {secret}"
LogProbFn = Callable[[list[str]], list[float]]
GreedyFn = Callable[[list[list[int]], int], list[list[int]]]
"""(prompts as token ids, n new tokens) -> greedy continuations (new tokens only), in order."""


@dataclass(frozen=True, slots=True)
class Canary:
    """A random secret planted in the training data `repeats` times."""

    secret: str
    """The random digits, zero-padded to a fixed width."""
    repeats: int
    """How many copies go into the training split."""
    template: str = DEFAULT_TEMPLATE
    """Sentence with a `{secret}` slot; candidates use the same template."""

    @property
    def text(self) -> str:
        return self.template.format(secret=self.secret)


def make_canaries(
    n: int,
    seed: int,
    repeats: Sequence[int] = (1, 10, 100),
    digits: int = 6,
    template: str = DEFAULT_TEMPLATE,
) -> list[Canary]:
    """`n` canaries per repeat count, all with distinct secrets of `digits` random digits."""
    if "{secret}" not in template:
        raise ValueError(f"canary template {template!r} has no {{secret}} slot")
    total = n * len(repeats)
    if total > 10**digits:
        raise ValueError(f"{total} distinct canaries do not fit in {digits} digits")
    rng = np.random.default_rng(seed)
    secrets = rng.choice(10**digits, size=total, replace=False)
    return [
        Canary(secret=f"{int(s):0{digits}d}", repeats=int(r), template=template)
        for s, r in zip(secrets, [r for r in repeats for _ in range(n)], strict=True)
    ]


def canary_documents(canaries: Sequence[Canary]) -> list[str]:
    """Each canary's text, once per repeat: one training document per copy."""
    return [c.text for c in canaries for _ in range(c.repeats)]


def insert_canaries(documents: Sequence[str], canaries: Sequence[Canary], seed: int) -> list[str]:
    """`documents` with the canary copies inserted at random positions (so copies spread over
    shards and windows). Call it on the train split after filtering and deduplication: dedup would
    collapse the copies into one, and length filters would drop such short documents."""
    extra = canary_documents(canaries)
    rng = np.random.default_rng(seed)
    slots = np.sort(rng.integers(0, len(documents) + 1, size=len(extra)))
    out: list[str] = []
    previous = 0
    for slot, text in zip(slots, extra, strict=True):
        out.extend(documents[previous:slot])
        out.append(text)
        previous = slot
    out.extend(documents[previous:])
    return out


def canaries_to_records(canaries: Sequence[Canary]) -> list[dict[str, object]]:
    """JSON-ready records, for `clean` to save and `harm` to read back."""
    return [asdict(c) for c in canaries]


def canaries_from_records(records: Iterable[dict[str, object]]) -> list[Canary]:
    return [
        Canary(secret=str(r["secret"]), repeats=int(r["repeats"]), template=str(r["template"]))
        for r in records
    ]


def exposure(canary_logprob: float, candidate_logprobs: Sequence[float]) -> float:
    """log2(m + 1) - log2(rank): rank of the canary among itself and m candidates, 1 + the number
    of candidates at least as probable (ties count against the canary)."""
    if len(candidate_logprobs) == 0:
        raise ValueError("exposure needs at least one candidate secret to rank the canary against")
    rank = 1 + int(np.count_nonzero(np.asarray(candidate_logprobs) >= canary_logprob))
    return math.log2(len(candidate_logprobs) + 1) - math.log2(rank)


def candidate_secrets(digits: int, n_candidates: int, exclude: set[str], seed: int) -> list[str]:
    """`n_candidates` distinct random secrets not in `exclude`, or every one if fewer exist."""
    space = 10**digits
    if n_candidates >= space - len(exclude):
        return [s for s in (f"{i:0{digits}d}" for i in range(space)) if s not in exclude]
    rng = np.random.default_rng(seed)
    chosen: list[str] = []
    seen = set(exclude)
    while len(chosen) < n_candidates:
        for i in rng.choice(space, size=n_candidates - len(chosen), replace=False):
            secret = f"{int(i):0{digits}d}"
            if secret not in seen:
                seen.add(secret)
                chosen.append(secret)
    return chosen


def canary_exposures(
    canaries: Sequence[Canary], logprob_fn: LogProbFn, n_candidates: int = 1000, seed: int = 0
) -> dict[str, object]:
    """Exposure of every canary against one shared candidate set per (template, width), and the
    mean exposure per repeat count (one `logprob_fn` call per template)."""
    rows: list[dict[str, object]] = []
    by_format: dict[tuple[str, int], list[Canary]] = {}
    for canary in canaries:
        by_format.setdefault((canary.template, len(canary.secret)), []).append(canary)
    max_exposure = 0.0
    for (template, digits), group in by_format.items():
        exclude = {c.secret for c in group}
        secrets = candidate_secrets(digits, n_candidates, exclude, seed)
        texts = [c.text for c in group] + [template.format(secret=s) for s in secrets]
        scores = list(logprob_fn(texts))
        if len(scores) != len(texts):
            raise ValueError(f"logprob_fn returned {len(scores)} scores for {len(texts)} texts")
        candidates = scores[len(group) :]
        max_exposure = max(max_exposure, math.log2(len(candidates) + 1))
        for canary, logp in zip(group, scores[: len(group)], strict=True):
            value = exposure(logp, candidates)
            rows.append(
                {
                    "secret": canary.secret,
                    "repeats": canary.repeats,
                    "exposure": value,
                    "n_candidates": len(candidates),
                }
            )
    by_repeats: dict[int, list[float]] = {}
    for row in rows:
        by_repeats.setdefault(int(row["repeats"]), []).append(float(row["exposure"]))
    return {
        "canaries": rows,
        "mean_exposure_by_repeats": {r: float(np.mean(v)) for r, v in sorted(by_repeats.items())},
        "max_measurable_exposure": max_exposure,
    }


def make_extraction_pairs(
    documents: Iterable[Sequence[int]],
    prefix_len: int = 50,
    suffix_len: int = 50,
    max_pairs: int = 100,
    seed: int = 0,
) -> list[tuple[list[int], list[int]]]:
    """(first `prefix_len` tokens, next `suffix_len` tokens) of up to `max_pairs` documents,
    chosen at random among those with at least prefix_len + suffix_len tokens."""
    eligible = [list(d) for d in documents if len(d) >= prefix_len + suffix_len]
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(len(eligible))[:max_pairs]
    return [
        (eligible[i][:prefix_len], eligible[i][prefix_len : prefix_len + suffix_len])
        for i in sorted(chosen)
    ]


def verbatim_matches(
    prefix_suffix_pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    greedy_fn: GreedyFn,
    n: int = 50,
) -> list[bool]:
    """Whether each prefix's greedy continuation reproduces the first `n` suffix tokens exactly."""
    if any(len(suffix) < n for _, suffix in prefix_suffix_pairs):
        raise ValueError(f"every suffix needs at least n={n} tokens to test extraction")
    outputs = list(greedy_fn([list(prefix) for prefix, _ in prefix_suffix_pairs], n))
    if len(outputs) != len(prefix_suffix_pairs):
        raise ValueError(
            f"greedy_fn returned {len(outputs)} outputs for {len(prefix_suffix_pairs)}"
        )
    return [
        list(out[:n]) == list(suffix[:n])
        for out, (_, suffix) in zip(outputs, prefix_suffix_pairs, strict=True)
    ]


def verbatim_extraction_rate(
    prefix_suffix_pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    greedy_fn: GreedyFn,
    n: int = 50,
) -> float:
    """Share of training prefixes whose greedy continuation is the next `n` tokens verbatim."""
    if not prefix_suffix_pairs:
        raise ValueError("verbatim_extraction_rate needs at least one (prefix, suffix) pair")
    return float(np.mean(verbatim_matches(prefix_suffix_pairs, greedy_fn, n)))
