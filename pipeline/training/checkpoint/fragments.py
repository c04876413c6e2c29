"""A rank's range of one parameter with its AdamW moments: what checkpoints stage and write.

Free of DeepSpeed, so that the processes that only read or write checkpoint shards (the export
task, the staging and shard-format code) do not pay for importing it (about 1.4 s on two cores,
most of it the MLflow, pandas and FastAPI modules DeepSpeed's autotuner pulls in).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

ADAM_MOMENTS = ("exp_avg", "exp_avg_sq")


@dataclass(slots=True)
class Fragment:
    """One rank's range of one parameter, with views of its values and AdamW moments."""

    name: str
    shape: tuple[int, ...]
    """The full parameter's shape."""
    start: int
    """Offset of the range in the flattened parameter."""
    values: dict[str, torch.Tensor]
    """'param', 'exp_avg', 'exp_avg_sq': 1-D views of the range (live: copy before stepping)."""

    @property
    def numel(self) -> int:
        return self.values["param"].numel()
