"""`sample`: continuations of the configured prompts, greedy and top-p, with diversity stats and
the word-level signs of degenerate text (one word filling a completion, a looping 4-gram)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.evaluation.model_pool import ModelPoolConfig, cpus_of_stage
from lmforge.pipeline.typed_config import from_mapping


@dataclass(kw_only=True, slots=True)
class SampleConfig(ModelPoolConfig):
    prompts: list[str] = field(default_factory=lambda: ["The Python interpreter"])
    "Prompts to continue."
    max_new_tokens: int = 48
    "Tokens generated per continuation at most."
    top_p: float = 0.9
    "Nucleus mass for the sampled continuations."
    top_k: int = 0
    "Keep only the k most probable tokens (0 = off)."
    temperature: float = 0.8
    "Softmax temperature for the sampled continuations."
    seed: int = 0
    "Seed of the sampled continuations."

    def __post_init__(self) -> None:
        ModelPoolConfig.__post_init__(self)
        if not self.prompts:
            raise ValueError("eval.sample.prompts must list at least one prompt")


def parse(sections: dict) -> SampleConfig:
    return from_mapping(SampleConfig, sections["eval.sample"], "eval.sample")


@stage(
    name="sample",
    inputs=("pretrain", "train_tokenizer"),
    config=("eval.sample",),
    parse_config=parse,
    version="2",
    cpus_of=cpus_of_stage,  # none when it drives model actors, which hold the CPUs (or GPUs)
)
def sample(ctx: StageContext) -> dict:
    from lmforge.model.generate import SamplingConfig
    from lmforge.pipeline.evaluation.model_pool import ModelPool
    from lmforge.tokenizer.io import load_tokenizer

    cfg: SampleConfig = ctx.config
    modes = {
        "greedy": SamplingConfig(max_new_tokens=cfg.max_new_tokens, greedy=True),
        "top_p": SamplingConfig(
            max_new_tokens=cfg.max_new_tokens,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            temperature=cfg.temperature,
            seed=cfg.seed,
        ),
    }
    with ModelPool.for_stage(ctx, cfg, "eval.sample") as pool:
        completions = {mode: pool.complete(cfg.prompts, s) for mode, s in modes.items()}
        peak = pool.peak_rss_mb()
    tok = load_tokenizer(ctx.input("train_tokenizer"))
    records, stats = _records_and_stats(cfg.prompts, completions, tok)
    with open(ctx.out_dir / "samples.jsonl", "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    ctx.tracker.log_metrics(stats)
    ctx.tracker.log_artifact(ctx.out_dir / "samples.jsonl")
    actor = {} if peak is None else {"actor_peak_rss_mb": peak}
    return {**stats, "n_samples": len(records), **actor}


def _records_and_stats(prompts: list[str], completions: dict[str, list[str]], tok) -> tuple:
    """One record per completion, and the diversity and degeneracy figures of each mode."""
    from lmforge.pipeline.probes.diversity import diversity_stats, word_degeneracy

    records, stats = [], {}
    for mode, texts in completions.items():
        token_lists = [tok.encode(t).ids for t in texts]
        for key, value in {**diversity_stats(token_lists), **word_degeneracy(texts)}.items():
            stats[f"{mode}_{key}"] = value
        records += [
            {"mode": mode, "prompt": p, "completion": t}
            for p, t in zip(prompts, texts, strict=False)
        ]
    return records, stats
