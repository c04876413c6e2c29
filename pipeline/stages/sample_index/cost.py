"""The cost of `sample_index` (`stage.py` beside it): one process writes the window
order of every epoch the run reads (`train.max_steps x train.global_batch_size` positions over
the token data's windows), shuffled in place in its memory-mapped file. Wall time: a fixed
start-up plus seconds per position written; memory: a base plus the file's pages the process
touches (per byte of the order); bytes written: the order itself, by arithmetic.
"""

from __future__ import annotations

import math

from lmforge.pipeline.estimate.cost_model import (
    KNOWN,
    Cluster,
    ProcessCost,
    StageCost,
    process_base,
)


def _order_itemsize(n_windows: float) -> int:
    return 4 if n_windows <= 1 << 32 else 8  # training/sample_index.py's order_dtype


def size(config: dict, flow: dict, cluster: Cluster) -> dict[str, float]:
    train, block = config["train"], config["model"]["block_size"]
    windows = max(1.0, flow["train_tokens"] // (block + 1))
    return _size(windows, train["max_steps"] * train["global_batch_size"])


def _size(windows: float, positions: float) -> dict[str, float]:
    epochs = max(1, math.ceil(positions / windows))
    return {"n_windows": windows, "epochs": epochs, "positions": epochs * windows}


def size_of_run(sections: dict, summary: dict, upstream: dict, cluster: Cluster) -> dict:
    return {
        "n_windows": summary["n_windows"],
        "epochs": summary["epochs"],
        "positions": summary["positions"],
    }


def measured_of_run(summary: dict) -> dict[str, float]:
    return {}


def cost(s: dict[str, float]) -> StageCost:
    order_bytes = s["positions"] * _order_itemsize(s["n_windows"])
    return StageCost(
        wall_s={"fixed_s": 1, "s_per_position": s["positions"]},
        store_bytes={KNOWN: order_bytes},
        processes=[
            ProcessCost(
                "coordinator",
                {**process_base(s), "coordinator_mb_per_order_byte": order_bytes},
                coordinator=True,
                remedy="a node with more memory (the order's pages are mapped as it is written)",
            )
        ],
        notes=[f"{s['epochs']:.0f} epoch(s) of {s['n_windows']:.3g} windows"],
    )
