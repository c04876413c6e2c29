"""How often a trained model's greedy completions loop, over many prompts instead of four.

The demo's greedy bar is checked on the four prompts of `eval.sample`: a model that loops on one
prompt in five passes or fails it by the luck of those four. This scores a workdir's model on
the sentence starts of its own validation split (the first three words of every sentence that
opens with a capitalised word, a spread of `--prompts` of them, plus the four sample prompts),
greedy, as many new tokens as the sample stage gave (the default when the run stopped before it),
and reports the loop rate: the share of completions that repeat a word 4-gram more than 3 times
(the bar's test for one completion), with a 95% Wilson interval, the mean of the completions'
most repeated 4-gram counts, and the most repetitive completion.

    .venv/bin/python bench/greedy_loops.py WORKDIR [--prompts 200]

Prints one JSON line. About 5 seconds for the tiny preset's model on one core.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

MAX_REPEATS = 3
"""A completion loops when one of its word 4-grams occurs more often than this (the demo's bar)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_OPENING = re.compile(r"[A-Z][a-z]*")
_WORD = re.compile(r"[A-Za-z,]+")


def sentence_starts(texts: Iterable[str], n: int, words: int = 3) -> list[str]:
    """Up to `n` distinct openings (`words` plain words) of sentences of at least twice as many
    words that begin with a capitalised word, spread evenly over their sorted order (from the
    first to near the last, not the first `n`)."""
    starts: set[str] = set()
    for text in texts:
        for sentence in _SENTENCE_END.split(text.replace("\n", " ")):
            tokens = sentence.split()
            if len(tokens) < 2 * words or not _OPENING.fullmatch(tokens[0]):
                continue
            if all(_WORD.fullmatch(t) for t in tokens[:words]):
                starts.add(" ".join(tokens[:words]))
    ordered = sorted(starts)
    if len(ordered) <= n:
        return ordered
    return [ordered[i * len(ordered) // n] for i in range(n)]


def loops(completion: str) -> bool:
    """Whether one completion repeats a word 4-gram more than `MAX_REPEATS` times."""
    from lmforge.pipeline.probes.diversity import max_ngram_count

    return max_ngram_count(completion.split(), 4) > MAX_REPEATS


def wilson_interval(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion hits / n (sound near 0 and 1, unlike
    the normal approximation)."""
    if n <= 0:
        raise ValueError("the interval needs at least one trial")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def loop_figures(prompts: Sequence[str], completions: Sequence[str]) -> dict:
    """Loop rate (with its interval), mean most-repeated 4-gram count and the most repetitive
    prompt + completion of the completions of `prompts`."""
    from lmforge.pipeline.probes.diversity import max_ngram_count

    hits = sum(loops(c) for c in completions)
    counts = [max_ngram_count(c.split(), 4) for c in completions]
    low, high = wilson_interval(hits, len(completions))
    worst = max(range(len(counts)), key=counts.__getitem__)
    return {
        "greedy_loop_rate": round(hits / len(completions), 4),
        "greedy_loop_rate_ci": [round(low, 4), round(high, 4)],
        "greedy_loop_prompts": len(completions),
        "greedy_mean_max_4gram_count": round(sum(counts) / len(counts), 3),
        "most_repetitive": prompts[worst] + completions[worst],
    }


def _sample_config(artifacts: dict[str, Path]) -> dict:
    """The run's `eval.sample` section (the shipped default when it stopped before `sample`)."""
    if "sample" in artifacts:
        manifest = json.loads((artifacts["sample"] / "manifest.json").read_text())
        return manifest["config"]["eval.sample"]
    from lmforge.pipeline.config_tree import compose

    return compose()["eval"]["sample"]


def measure(artifacts: dict[str, Path], n_prompts: int) -> dict:
    """Greedy loop figures of the model of a run's artifacts (by stage name)."""
    import torch

    from lmforge.model.generate import SamplingConfig
    from lmforge.pipeline.evaluation.trained_model import TrainedModel
    from lmforge.pipeline.sources.parquet_shards import iter_texts

    sample_cfg = _sample_config(artifacts)
    prompts = list(sample_cfg["prompts"])
    prompts += sentence_starts(iter_texts(artifacts["clean"], "val"), n_prompts)
    model = TrainedModel(artifacts["pretrain"], artifacts["train_tokenizer"])
    sampling = SamplingConfig(max_new_tokens=sample_cfg["max_new_tokens"], greedy=True)
    completions: list[str] = []
    with torch.no_grad():
        for i in range(0, len(prompts), 32):
            completions += model.complete(prompts[i : i + 32], sampling)
    return loop_figures(prompts, completions)


def stage_artifacts(workdir: Path) -> dict[str, Path]:
    """The artifact directory of each stage of the workdir's latest run (`lmforge status`)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lmforge.pipeline.cli.main",
            "status",
            "--json",
            f"workdir={workdir}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return {e["stage"]: Path(e["artifact"]) for e in json.loads(proc.stdout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--prompts", type=int, default=200, help="validation sentence starts")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    figures = measure(stage_artifacts(args.workdir), args.prompts)
    print(json.dumps({"bench": "greedy_loops", "workdir": str(args.workdir), **figures}))


if __name__ == "__main__":
    main()
