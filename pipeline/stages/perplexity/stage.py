"""`perplexity`: validation perplexity (with a 95% bootstrap interval over documents) and bits per
byte, against n-gram baselines (add-k unigram and bigram, Kneser-Ney trigram) and the freshly
initialised model, plus minimal pairs and the scaling-law prediction.

The stage drives a pool of model actors (`model_pool`) and holds no CPU of its own: the
validation split is scored range by range on the actors (`stream_scoring`), which read the token
shards themselves; the stage combines their sums in order, so the figures are those of one pass
over the split whatever the pool's size, and its memory does not grow with the split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.evaluation.model_pool import ModelPoolConfig, cpus_of_stage
from lmforge.pipeline.typed_config import from_mapping

BASELINE_TRAIN_TOKENS = 2_000_000
"""Training tokens (from the start of the train split) the n-gram baselines are fitted on."""


@dataclass(kw_only=True, slots=True)
class PerplexityConfig(ModelPoolConfig):
    actors: int = 0
    "Model actors scoring the split (0 = one per GPU, or per `threads_per_actor` CPUs)."
    stride: int = 0
    "Sliding-window stride in tokens (0 = the model's block size)."
    max_tokens: int = 200_000
    "Validation tokens scored at most (0 = all)."
    max_documents: int = 200
    "Validation documents scored one by one and written for lm-evaluation-harness (0 = all)."
    batches_per_call: int = 16
    "Forward passes of `batch_size` windows in one actor call: the unit of work and of progress."
    ngram_k: float = 0.1
    "Add-k smoothing of the unigram/bigram baselines."
    bootstrap_samples: int = 1000
    "Resamples of the validation documents for the 95% interval of val perplexity."
    bootstrap_seed: int = 0
    "Seed of the document resampling."
    bootstrap_groups: int = 10_000
    "Runs of consecutive documents the interval resamples at most (one document each while fewer)."
    init_max_tokens: int = 1_000_000
    "Validation tokens (whole calls, from the start) the initial model scores (0 = all)."
    log_every_s: float = 30.0
    "Seconds between progress lines (tokens scored, tok/s, ETA)."

    def __post_init__(self) -> None:
        ModelPoolConfig.__post_init__(self)
        for name in ("bootstrap_samples", "bootstrap_groups", "batches_per_call"):
            if getattr(self, name) < 1:
                raise ValueError(f"eval.perplexity.{name} must be >= 1, got {getattr(self, name)}")


def parse(sections: dict) -> PerplexityConfig:
    return from_mapping(PerplexityConfig, sections["eval.perplexity"], "eval.perplexity")


def _model_config(ctx: StageContext):
    import json

    from lmforge.model.config import ModelConfig
    from lmforge.model.weights import CONFIG_FILE

    path = ctx.input("pretrain") / "model" / CONFIG_FILE
    return ModelConfig.from_dict(json.loads(path.read_text(encoding="utf-8")))


def _baselines(tokens, cfg: PerplexityConfig, vocab_size: int) -> dict:
    """The n-gram baselines, fitted on the start of the train split (a bounded read)."""
    from lmforge.pipeline.probes.ngram import fit_baselines
    from lmforge.pipeline.stages.perplexity.token_stream import TokenStream, plan_stream

    train = TokenStream(plan_stream(tokens, "train", BASELINE_TRAIN_TOKENS))
    return fit_baselines([train.read(0, train.spec.n_tokens)], vocab_size, k=cfg.ngram_k)


def _stream_figures(cfg: PerplexityConfig, sums, baselines: dict) -> dict:
    """Perplexity, bits per byte and intervals from the combined sums of the split."""
    from lmforge.pipeline.probes.perplexity_math import (
        bits_per_byte,
        bootstrap_perplexity_interval,
        bootstrap_ratio_interval,
        perplexity,
    )

    boot = {"n_boot": cfg.bootstrap_samples, "seed": cfg.bootstrap_seed}
    mean = sums.mean_nll("model")
    nll, tokens = sums.by_group("model")
    low, high = bootstrap_perplexity_interval(nll, tokens, **boot)
    stats = {
        "val_loss": mean,
        "val_perplexity": math.exp(mean),
        "val_bits_per_byte": bits_per_byte(sums.totals["model"][0], sums.bytes),
        "val_perplexity_ci_low": low,
        "val_perplexity_ci_high": high,
        "val_tokens_scored": sums.totals["model"][1],
        "val_interval_groups": int(tokens.size),
    }
    if "init" in sums.totals:
        stats["init_perplexity"] = math.exp(sums.mean_nll("init"))
        stats["init_tokens_scored"] = sums.totals["init"][1]
    for name in baselines:
        ce = sums.mean_nll(name)
        stats[f"{name}_cross_entropy"] = ce
        stats[f"{name}_perplexity"] = perplexity(ce)
        nll, base, tokens = sums.by_group("model", name)
        low, high = bootstrap_ratio_interval(nll, base, tokens, **boot)
        stats[f"{name}_ratio_ci_low"], stats[f"{name}_ratio_ci_high"] = low, high
    return stats


def _score_split(ctx: StageContext, cfg: PerplexityConfig, pool, model_cfg, tokens=None) -> dict:
    """The validation split (of `tokens`, default tokenize's artifact) scored on the pool, with
    its throughput; the n-gram baselines are fitted on the same artifact's train split."""
    from lmforge.pipeline.evaluation.scoring_progress import ScoringProgress
    from lmforge.pipeline.stages.perplexity.stream_scoring import (
        StreamJob,
        ranges_for_tokens,
        score_stream,
    )
    from lmforge.pipeline.stages.perplexity.token_stream import plan_stream

    stride = cfg.stride or model_cfg.block_size
    if stride > model_cfg.block_size:
        raise ConfigError(
            f"eval.perplexity.stride={cfg.stride} exceeds the model's block_size "
            f"{model_cfg.block_size}; use at most that (0 = block size)"
        )
    tokens = ctx.input("tokenize") if tokens is None else tokens
    val = plan_stream(tokens, "val", cfg.max_tokens)
    baselines = _baselines(tokens, cfg, model_cfg.vocab_size)
    per_range = cfg.batch_size * cfg.batches_per_call
    job = StreamJob(
        stream=val,
        block_size=model_cfg.block_size,
        stride=stride,
        batch_size=cfg.batch_size,
        max_groups=cfg.bootstrap_groups,
        baselines=baselines,
        init_ranges=ranges_for_tokens(cfg.init_max_tokens, per_range, stride),
    )
    progress = ScoringProgress("perplexity", max(val.n_tokens - 1, 0), ctx.tracker, cfg.log_every_s)
    sums = score_stream(pool, job, per_range, progress)
    progress.report()
    stats = _stream_figures(cfg, sums, baselines)
    stats["val_documents_scored"] = val.n_docs
    stats["val_tokens_per_s"] = progress.tokens_per_s()
    stats["val_scoring_s"] = progress.elapsed_s()
    return stats


MIXED = ("val_loss", "val_bits_per_byte", "init_loss")
"""Figures of a mixture that are the sources' weighted by the mixture's weights."""


def mix_of(per_source: dict[str, dict], weights: dict[str, float]) -> dict:
    """The mix's figures from each source's: cross-entropies and bits per byte weighted by the
    mixture's weights, perplexities their exponentials; counts summed; each source's own
    figures under `sources`."""
    total = sum(weights[name] for name in per_source)
    share = {name: weights[name] / total for name in per_source}
    per_source = {name: dict(figures) for name, figures in per_source.items()}
    for figures in per_source.values():
        if "init_perplexity" in figures:
            figures["init_loss"] = math.log(figures["init_perplexity"])
    first = next(iter(per_source.values()))
    mixed = [*MIXED, *(k for k in first if k.endswith("_cross_entropy"))]
    stats: dict = {}
    for key in mixed:
        if all(key in figures for figures in per_source.values()):
            stats[key] = sum(share[s] * figures[key] for s, figures in per_source.items())
    stats["val_perplexity"] = math.exp(stats["val_loss"])
    if "init_loss" in stats:
        stats["init_perplexity"] = math.exp(stats.pop("init_loss"))
    for key in [k for k in stats if k.endswith("_cross_entropy")]:
        stats[key.replace("_cross_entropy", "_perplexity")] = math.exp(stats[key])
    for key in ("val_tokens_scored", "val_documents_scored", "val_scoring_s"):
        stats[key] = sum(figures.get(key, 0) for figures in per_source.values())
    stats["val_tokens_per_s"] = stats["val_tokens_scored"] / max(stats["val_scoring_s"], 1e-9)
    stats["mix_weights"] = share
    for figures in per_source.values():
        figures.pop("init_loss", None)
    stats["sources"] = per_source
    return stats


def _score_mixture(ctx: StageContext, cfg: PerplexityConfig, pool, model_cfg) -> dict:
    """Each source's validation split scored on its own, and the mix: cross-entropies and bits
    per byte weighted by the mixture's weights (perplexities are their exponentials)."""
    per_source = {
        source: _score_split(ctx, cfg, pool, model_cfg, tokens)
        for source, tokens in ctx.inputs_of("tokenize").items()
    }
    stats = mix_of(per_source, {s["name"]: float(s["weight"]) for s in ctx.sources})
    for source, figures in per_source.items():
        ctx.tracker.log_metrics(
            {f"{source}/{k}": figures[k] for k in ("val_perplexity", "val_bits_per_byte")}
        )
    return stats


def _score_documents(ctx: StageContext, cfg: PerplexityConfig, pool) -> dict:
    """The first `max_documents` validation documents, each scored on its own, and written as
    the lm-evaluation-harness task (streamed: batches go out as the file is written)."""
    from itertools import chain, islice

    from lmforge.pipeline.evaluation.scoring_progress import ScoringProgress
    from lmforge.pipeline.evaluation.trained_model import DocumentScore
    from lmforge.pipeline.sources.parquet_shards import iter_texts
    from lmforge.pipeline.stages.perplexity.lm_eval_task import TaskWriter

    clean = ctx.inputs_of("clean").values()  # a mixture's sources one after another
    texts = islice(
        chain.from_iterable(iter_texts(d, "val") for d in clean), cfg.max_documents or None
    )
    total = DocumentScore(0.0, 0, 0, 0)
    manifests = ctx.manifests_of("clean").values()
    in_split = sum(int(m["summary"].get("val_docs", 0) or 0) for m in manifests)
    expected = min(cfg.max_documents or in_split, in_split)
    progress = ScoringProgress(
        "perplexity", expected, ctx.tracker, cfg.log_every_s, unit="documents"
    )
    with TaskWriter(ctx.out_dir / "lm_eval", ctx.final_dir / "lm_eval") as task:

        def batches():
            while batch := list(islice(texts, cfg.batch_size)):
                task.add(batch)
                yield batch, cfg.stride

        for part in pool.map(_document_score, batches()):
            total.add(part)
            progress.advance(part.documents)
    return {
        "val_doc_perplexity": total.perplexity,
        "val_doc_bits_per_byte": total.bits_per_byte,
        "val_doc_tokens": total.tokens,
    }


def _document_score(worker, job: tuple):
    from lmforge.pipeline.evaluation.trained_model import score_documents

    texts, stride = job
    return score_documents(worker.trained, texts, stride)


@stage(
    name="perplexity",
    inputs=("pretrain", "tokenize", "train_tokenizer", "clean"),
    config=("eval.perplexity",),
    parse_config=parse,
    version="4",
    cpus_of=cpus_of_stage,  # none when it drives model actors, which hold the CPUs (or GPUs)
    mixture_fields={"weight": None},  # the mix is weighted by the mixture's weights
)
def perplexity(ctx: StageContext) -> dict:
    from lmforge.model.flops import non_embedding_parameters
    from lmforge.pipeline.evaluation.model_pool import ModelPool
    from lmforge.pipeline.probes.minimal_pairs import minimal_pair_accuracy
    from lmforge.pipeline.probes.scaling import loss_from_params, loss_from_tokens

    cfg: PerplexityConfig = ctx.config
    model_cfg = _model_config(ctx)
    with ModelPool.for_stage(ctx, cfg, "eval.perplexity") as pool:
        if ctx.sources:
            stats = _score_mixture(ctx, cfg, pool, model_cfg)
        else:
            stats = _score_split(ctx, cfg, pool, model_cfg)
        stats.update(_score_documents(ctx, cfg, pool))
        stats["minimal_pair_accuracy"] = minimal_pair_accuracy(pool.logprobs)["accuracy"]
        stats["scoring_actors"] = len(pool.actors)  # 0: in the stage's process
        stats["scoring_device"] = pool.device
        if (peak := pool.peak_rss_mb()) is not None:
            stats["scoring_actor_peak_rss_mb"] = peak
    stats["vocab_size"] = model_cfg.vocab_size
    train_tokens = int(ctx.input_manifests["pretrain"]["summary"].get("tokens", 0) or 0)
    stats["scaling_law_loss_from_params"] = loss_from_params(non_embedding_parameters(model_cfg))
    if train_tokens:
        stats["scaling_law_loss_from_tokens"] = loss_from_tokens(train_tokens)
    ctx.tracker.log_metrics({k: v for k, v in stats.items() if isinstance(v, int | float)})
    return stats
