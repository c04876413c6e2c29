"""Each minimal pair's margin, log P(good) - log P(bad) in nats, of trained models: which pairs a
model gets right or wrong by a clear margin, and which lie near a tie.

The demo's bar counts the pairs a model gets right (`minimal_pair_accuracy` of the perplexity
stage, at least 0.7). A pair within a nat of a tie lands on either side with the training seed and
the machine's rounding, so the count alone does not tell a model that holds the bar from one that
met it by luck (docs/training.md). This scores each workdir's model on the frozen pairs and
counts the pairs right by more than `--tie` nats, wrong by more, and within it.

    .venv/bin/python bench/minimal_pair_margins.py WORKDIR [WORKDIR ...] [--tie 1.0]

Prints a table (one column of margins per workdir), then one JSON line. A few seconds a workdir.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from greedy_loops import stage_artifacts  # noqa: E402

from lmforge.pipeline.probes.minimal_pairs import (  # noqa: E402
    MINIMAL_PAIRS,
    MinimalPair,
    pair_margins,
)

TIE_NATS = 1.0
"""Margins within this many nats of zero count as near-ties."""


def margin_counts(
    margins: Sequence[float], pairs: Sequence[MinimalPair] = MINIMAL_PAIRS, tie: float = TIE_NATS
) -> dict:
    """Pairs right (margin > 0, as the bar counts them: a tie fails), right by more than `tie`,
    wrong by more than `tie`, and the good sentences of the pairs within `tie` of a tie."""
    if len(margins) != len(pairs):
        raise ValueError(f"{len(margins)} margins for {len(pairs)} pairs")
    return {
        "right": sum(m > 0 for m in margins),
        "pairs": len(pairs),
        "sure_right": sum(m > tie for m in margins),
        "sure_wrong": sum(m < -tie for m in margins),
        "near_ties": [p.good for p, m in zip(pairs, margins, strict=True) if abs(m) <= tie],
        "tie_nats": tie,
    }


def model_margins(artifacts: dict[str, Path]) -> list[float]:
    """The pair margins of the model of a run's artifacts (by stage name)."""
    from lmforge.pipeline.evaluation.trained_model import TrainedModel

    model = TrainedModel(artifacts["pretrain"], artifacts["train_tokenizer"])
    return pair_margins(model.logprobs)  # TrainedModel.logprobs runs without autograd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdirs", type=Path, nargs="+")
    parser.add_argument("--tie", type=float, default=TIE_NATS, help="near-tie width in nats")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    margins = {str(w): model_margins(stage_artifacts(w)) for w in args.workdirs}
    names = [w.name[-12:] for w in args.workdirs]
    print(f"{'good sentence':<34}{'bad sentence':<26}" + "".join(f"{n:>13}" for n in names))
    for i, pair in enumerate(MINIMAL_PAIRS):
        cells = "".join(f"{m[i]:>13.2f}" for m in margins.values())
        print(f"{pair.good[:33]:<34}{pair.bad[:25]:<26}{cells}")
    counts = {w: margin_counts(m, tie=args.tie) for w, m in margins.items()}
    for label in ("right", "sure_right", "sure_wrong"):
        print(f"{label:<60}" + "".join(f"{c[label]:>13}" for c in counts.values()))
    print(f"{'near_ties':<60}" + "".join(f"{len(c['near_ties']):>13}" for c in counts.values()))
    result = {
        "bench": "minimal_pair_margins",
        "margins": {w: [round(x, 3) for x in m] for w, m in margins.items()},
        "counts": counts,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
