"""`sample`: continuations of the configured prompts, greedy and top-p, with diversity stats and
the word-level signs of degenerate text (one word filling a completion, a looping 4-gram)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping


@dataclass(kw_only=True, slots=True)
class SampleConfig:
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
    num_cpus=0.5,
)
def sample(ctx: StageContext) -> dict:
    from lmforge.model.generate import SamplingConfig
    from lmforge.pipeline.probes.diversity import diversity_stats, word_degeneracy
    from lmforge.pipeline.stages.trained_model import TrainedModel

    cfg: SampleConfig = ctx.config
    trained = TrainedModel(ctx.input("pretrain"), ctx.input("train_tokenizer"))
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
    records, stats = [], {}
    for mode, sampling in modes.items():
        texts = trained.complete(cfg.prompts, sampling)
        token_lists = [trained.tok.encode(t).ids for t in texts]
        for key, value in {**diversity_stats(token_lists), **word_degeneracy(texts)}.items():
            stats[f"{mode}_{key}"] = value
        records += [
            {"mode": mode, "prompt": p, "completion": t}
            for p, t in zip(cfg.prompts, texts, strict=False)
        ]
    with open(ctx.out_dir / "samples.jsonl", "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    ctx.tracker.log_metrics(stats)
    ctx.tracker.log_artifact(ctx.out_dir / "samples.jsonl")
    return {**stats, "n_samples": len(records)}
