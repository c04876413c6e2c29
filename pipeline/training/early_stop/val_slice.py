"""The validation loss a run logs every `train.eval_every` steps (`val_loss`).

A fixed slice, the validation split's first `train.eval_windows` windows, so that two runs, or
two steps of one run, are scored on the same tokens: what an early-stopping rule compares.
Every rank scores the whole slice (under ZeRO-3 each forward gathers parameters from all ranks,
so they all take part); dropout is off while it scores.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from lmforge.tokenizer.dataset import TokenDataset

BATCH_WINDOWS = 8
"""Windows scored per forward pass."""


class ValidationSlice:
    """The first `windows` windows of the validation split of `data_dir`."""

    def __init__(self, data_dir, block_size: int, windows: int) -> None:
        dataset = TokenDataset(data_dir, "val", block_size)
        count = min(windows, len(dataset))
        if count < 1:
            raise ValueError(
                f"the validation split holds no window of {block_size + 1} tokens: lower "
                "model.block_size, raise data.val_fraction, or set train.eval_every=0"
            )
        rows = np.stack([np.asarray(dataset[i], dtype=np.int64) for i in range(count)])
        tokens = torch.from_numpy(rows)
        self.batches = [
            (tokens[i : i + BATCH_WINDOWS, :-1], tokens[i : i + BATCH_WINDOWS, 1:])
            for i in range(0, count, BATCH_WINDOWS)
        ]

    def loss(self, engine, device: torch.device) -> float:
        """Mean next-token cross-entropy of the model over the slice."""
        module = engine.module
        was_training = module.training
        module.eval()
        total, count = 0.0, 0
        try:
            with torch.no_grad():
                for x, y in self.batches:
                    logits, _ = engine(x.to(device))
                    flat = logits.float().reshape(-1, logits.size(-1))
                    total += float(F.cross_entropy(flat, y.to(device).reshape(-1), reduction="sum"))
                    count += y.numel()
        finally:
            module.train(was_training)
        return total / count
