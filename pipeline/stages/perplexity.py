"""`perplexity`: validation perplexity (with a 95% bootstrap interval over documents) and bits per
byte, against n-gram baselines (add-k unigram and bigram, Kneser-Ney trigram) and the freshly
initialised model, plus minimal pairs and the scaling-law prediction."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping


@dataclass(kw_only=True, slots=True)
class PerplexityConfig:
    stride: int = 0
    "Sliding-window stride in tokens (0 = the model's block size)."
    max_tokens: int = 200_000
    "Validation tokens scored at most (0 = all)."
    max_documents: int = 200
    "Validation documents scored one by one and written for lm-evaluation-harness (0 = all)."
    ngram_k: float = 0.1
    "Add-k smoothing of the unigram/bigram baselines."
    bootstrap_samples: int = 1000
    "Resamples of the validation documents for the 95% interval of val perplexity."
    bootstrap_seed: int = 0
    "Seed of the document resampling."

    def __post_init__(self) -> None:
        if self.bootstrap_samples < 1:
            raise ValueError(
                f"eval.perplexity.bootstrap_samples must be >= 1, got {self.bootstrap_samples}"
            )


def parse(sections: dict) -> PerplexityConfig:
    return from_mapping(PerplexityConfig, sections["eval.perplexity"], "eval.perplexity")


def _stream(data_dir, split: str, max_tokens: int):
    import numpy as np

    from lmforge.tokenizer.dataset import TokenDataset

    dataset = TokenDataset(data_dir, split, block_size=1)
    parts, total = [], 0
    for shard in dataset.shards:
        take = shard.tokens if not max_tokens else shard.tokens[: max_tokens - total]
        parts.append(np.asarray(take, dtype=np.int64))
        total += len(take)
        if max_tokens and total >= max_tokens:
            break
    return np.concatenate(parts), dataset


def _against_baselines(cfg: PerplexityConfig, train, val, doc_starts, doc_nll, vocab_size: int):
    """Each n-gram baseline's cross-entropy and perplexity on the validation stream, and the
    paired 95% interval of model perplexity / baseline perplexity over the same documents."""
    from lmforge.pipeline.probes.ngram import fit_baselines
    from lmforge.pipeline.probes.perplexity_math import (
        bootstrap_ratio_interval,
        document_sums,
        perplexity,
    )

    stats: dict[str, float] = {}
    for name, lm in fit_baselines([train], vocab_size, k=cfg.ngram_k).items():
        losses = -lm.token_log_probs(val)
        stats[f"{name}_cross_entropy"] = float(losses.mean())
        stats[f"{name}_perplexity"] = perplexity(float(losses.mean()))
        base_nll, tokens = document_sums(losses, doc_starts)
        low, high = bootstrap_ratio_interval(
            doc_nll, base_nll, tokens, n_boot=cfg.bootstrap_samples, seed=cfg.bootstrap_seed
        )
        stats[f"{name}_ratio_ci_low"], stats[f"{name}_ratio_ci_high"] = low, high
    return stats


@stage(
    name="perplexity",
    inputs=("pretrain", "tokenize", "train_tokenizer", "clean"),
    config=("eval.perplexity",),
    parse_config=parse,
    version="3",
    num_cpus=0.5,
)
def perplexity(ctx: StageContext) -> dict:
    import torch

    from lmforge.model.gpt import GPT
    from lmforge.model.perplexity import position_nll, token_nll
    from lmforge.pipeline.probes.minimal_pairs import minimal_pair_accuracy
    from lmforge.pipeline.probes.perplexity_math import (
        bits_per_byte,
        bootstrap_perplexity_interval,
        document_sums,
    )
    from lmforge.pipeline.probes.scaling import loss_from_params, loss_from_tokens
    from lmforge.pipeline.sources.parquet_shards import iter_texts
    from lmforge.pipeline.stages.lm_eval_task import write_task
    from lmforge.pipeline.stages.trained_model import TrainedModel, score_documents

    cfg: PerplexityConfig = ctx.config
    trained = TrainedModel(ctx.input("pretrain"), ctx.input("train_tokenizer"))
    model, tok = trained.model, trained.tok
    block = model.config.block_size
    stride = cfg.stride or block
    val, val_set = _stream(ctx.input("tokenize"), "val", cfg.max_tokens)
    ids = torch.from_numpy(val)
    losses = position_nll(model, ids, block, stride).numpy()
    total_nll, n = float(losses.sum()), int(losses.size)
    doc_nll, doc_tokens = document_sums(losses, val_set.doc_offsets)
    low, high = bootstrap_perplexity_interval(
        doc_nll, doc_tokens, n_boot=cfg.bootstrap_samples, seed=cfg.bootstrap_seed
    )
    n_bytes = len(tok.decode(val[1:].tolist(), skip_special_tokens=True).encode("utf-8"))
    torch.manual_seed(0)
    fresh = GPT(model.config).eval()
    init_nll, init_n = token_nll(fresh, ids, block, stride)
    mean = total_nll / n
    stats = {
        "val_loss": mean,
        "val_perplexity": math.exp(mean),
        "val_bits_per_byte": bits_per_byte(total_nll, n_bytes),
        "val_perplexity_ci_low": low,
        "val_perplexity_ci_high": high,
        "val_tokens_scored": n,
        "val_documents_scored": int(doc_nll.size),
        "init_perplexity": math.exp(init_nll / init_n),
        "vocab_size": model.config.vocab_size,
    }
    train, _ = _stream(ctx.input("tokenize"), "train", 2_000_000)
    doc_starts = val_set.doc_offsets
    stats.update(_against_baselines(cfg, train, val, doc_starts, doc_nll, model.config.vocab_size))
    docs = list(iter_texts(ctx.input("clean"), "val"))[: cfg.max_documents or None]
    per_doc = score_documents(trained, docs, cfg.stride)
    stats["val_doc_perplexity"] = per_doc.perplexity
    stats["val_doc_bits_per_byte"] = per_doc.bits_per_byte
    stats["val_doc_tokens"] = per_doc.tokens
    task_dir = ctx.out_dir / "lm_eval"
    write_task(task_dir, ctx.final_dir / "lm_eval", docs)
    pairs = minimal_pair_accuracy(trained.logprobs)
    stats["minimal_pair_accuracy"] = pairs["accuracy"]
    n_params = model.num_parameters(non_embedding=True)
    train_tokens = int(ctx.input_manifests["pretrain"]["summary"].get("tokens", 0) or 0)
    stats["scaling_law_loss_from_params"] = loss_from_params(n_params)
    if train_tokens:
        stats["scaling_law_loss_from_tokens"] = loss_from_tokens(train_tokens)
    ctx.tracker.log_metrics({k: v for k, v in stats.items() if isinstance(v, int | float)})
    return stats
