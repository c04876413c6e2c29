"""The cost of `train_tokenizer` (`stage.py` beside it).

One process. It reads the whole train split twice (its size, then the hash-chosen sample:
`pipeline/sources/hash_sample.py`) and trains BPE on the sample, whose memory HF `tokenizers`
sets: every distinct pre-token and pair of the sample, so a base plus MB per sampled byte
(`tokenizer.sample_bytes` is the setting that bounds it). Wall time: a fixed start-up, seconds
per byte of the split read, per sampled byte trained on and per merge of the vocabulary.
"""

from __future__ import annotations

import math

from lmforge.pipeline.estimate.cost_model import (
    Cluster,
    ProcessCost,
    StageCost,
    config_part,
    process_base,
    startup_base,
)

BYTES_PER_TOKEN_POINTS = ((2048, 3.1), (50257, 4.4))
"""Bytes of English text per token of a byte-level BPE, by vocabulary size: about 3.1 at 2,048
(the tiny preset on the embedded documentation) and 4.4 at GPT-2's 50,257 on web text;
interpolated in log(vocabulary). `--bytes-per-token` replaces it with your measurement
(`val_bytes_per_token` in this stage's summary)."""


def bytes_per_token(vocab_size: int) -> float:
    (v0, b0), (v1, b1) = BYTES_PER_TOKEN_POINTS
    t = (math.log(vocab_size) - math.log(v0)) / (math.log(v1) - math.log(v0))
    return max(1.0, b0 + (b1 - b0) * min(max(t, -1.0), 1.5))


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    return _size(config["tokenizer"], flow["train_text_bytes"]) | {
        "bytes_per_token": flow.get("bytes_per_token")
        or bytes_per_token(config["tokenizer"]["vocab_size"])
    }


def _size(tok: dict, train_bytes: float) -> dict[str, float]:
    wanted = tok["sample_bytes"]
    sampled = train_bytes if wanted <= 0 else min(wanted, train_bytes)
    return {
        "train_text_bytes": train_bytes,
        "sample_bytes": sampled,
        "vocab_size": tok["vocab_size"],
    }


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    tok = config_part(sections, "tokenizer")
    found = _size(tok, summary.get("train_text_bytes", 0))
    found["sample_bytes"] = summary.get("sample_text_bytes", found["sample_bytes"])
    found["bytes_per_token"] = summary.get("val_bytes_per_token") or bytes_per_token(
        tok["vocab_size"]
    )
    return found


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    return StageCost(
        wall_s={
            **startup_base(s),
            "s_per_read_byte": s["train_text_bytes"],
            "s_per_sampled_byte": s["sample_bytes"],
            "s_per_vocab": s["vocab_size"],
        },
        store_bytes={"store_bytes_per_vocab": s["vocab_size"]},
        processes=[
            ProcessCost(
                "coordinator",
                {**process_base(s), "coordinator_mb_per_sampled_byte": s["sample_bytes"]},
                coordinator=True,
                remedy=f"tokenizer.sample_bytes={int(s['sample_bytes'] / 2):d} (a smaller sample)",
            )
        ],
        outputs={"vocab_size": s["vocab_size"], "bytes_per_token": s["bytes_per_token"]},
        notes=[f"{s['bytes_per_token']:.1f} bytes of text per token"],
    )
