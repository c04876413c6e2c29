"""Which checkpoint a run continues from, and whether it may.

After a worker failure Ray Train hands the workers the last checkpoint reported to it; otherwise
(a new run of the same key: interrupted, or finished with max_steps raised) the newest valid
checkpoint in the run's checkpoint directory. Rank 0 chooses and tells the others, so every rank
resumes from the same one. A checkpoint of another model, or past max_steps, is an error.
"""

from __future__ import annotations

import warnings

import ray.train
import torch.distributed as dist

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training import checkpoint as ckpt
from lmforge.pipeline.training import remote_checkpoints
from lmforge.pipeline.training.config import TrainConfig


def load_chosen_checkpoint(
    checkpoint_dir: str, rank: int, world: int
) -> ckpt.LoadedCheckpoint | None:
    """The checkpoint to resume from, loaded on every rank, or None for a fresh start."""
    choice = choose_checkpoint(checkpoint_dir) if rank == 0 else None
    if world > 1:
        box = [choice]
        dist.broadcast_object_list(box, src=0)
        choice = box[0]
    if choice is None:
        return None
    if choice == "reported":
        with ray.train.get_checkpoint().as_directory() as directory:
            return ckpt.load_checkpoint(directory)
    return remote_checkpoints.load(choice)


def choose_checkpoint(checkpoint_dir: str) -> str | None:
    """'reported' (Ray Train's latest, after a worker failure), a path or URI, or None."""
    reported = ray.train.get_checkpoint()
    if reported is not None:
        with reported.as_directory() as directory:
            problem = ckpt.verify_checkpoint(directory)
        if problem is None:
            return "reported"
        warnings.warn(
            f"skipping checkpoint {reported.path} from Ray Train: {problem}", stacklevel=2
        )
    return remote_checkpoints.latest(checkpoint_dir)


def check_resumable(
    loaded: ckpt.LoadedCheckpoint, model: ModelConfig, cfg: TrainConfig, n_windows: int
) -> None:
    """Raise CheckpointError if `loaded` cannot continue this run; warn if the data changed."""
    state = loaded.state
    if state.model_config and state.model_config != model.to_dict():
        raise ckpt.CheckpointError(
            f"checkpoint {loaded.path} was written for model {state.model_config}, but this run "
            f"trains {model.to_dict()}; use another checkpoint directory"
        )
    if state.step > cfg.max_steps:
        raise ckpt.CheckpointError(
            f"checkpoint {loaded.path} is at step {state.step}, past train.max_steps="
            f"{cfg.max_steps}; raise train.max_steps or use another checkpoint directory"
        )
    if state.n_windows != n_windows:
        warnings.warn(
            f"checkpoint {loaded.path} saw {state.n_windows} training windows, the data now has "
            f"{n_windows}: the data order after step {state.step} differs from the original run",
            stacklevel=2,
        )
