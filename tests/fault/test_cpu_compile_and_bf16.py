"""The GPU-only branches run on CPU: `train.compile=true` (torch.compile through DeepSpeed's
`engine.compile()`) and `train.precision=bf16` (autocast) train through the pretrain stage's code
path (Ray Train + DeepSpeed ZeRO-2 on 2 workers), the loss falls, and a run whose max_steps is
raised continues from the checkpoint the first run wrote."""

from __future__ import annotations

import pytest
from fault.training_runs import train_config

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "option", [{"compile": True}, {"precision": "bf16"}], ids=["compile", "bf16"]
)
def test_the_option_trains_on_cpu_and_its_checkpoint_resumes(runs, tmp_path, option):
    checkpoints = tmp_path / "checkpoints"
    first = runs.train("first", train_config(max_steps=6, **option), checkpoint_dir=checkpoints)
    assert first["steps"] == 6 and first["resumed_from_step"] is None
    assert first["final_loss"] < first["initial_loss"]

    resumed = runs.train(
        "resumed", train_config(max_steps=10, **option), checkpoint_dir=checkpoints
    )
    assert resumed["resumed_from_step"] == 6 and resumed["steps"] == 10
    losses = resumed["losses"]
    assert losses[:6] == first["losses"]  # the history comes from the checkpoint
    assert max(losses[6:]) < losses[0]  # the continued steps start from trained weights
    assert losses[-1] < losses[0]
