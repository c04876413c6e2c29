"""The export's Ray task, which models over `IN_PROCESS_WEIGHTS` take (forced here on a small
one): it writes the same model directory and HF export as the stage's own process does."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from sharded_checkpoints import gpt_checkpoint

from lmforge.model.config import ModelConfig
from lmforge.model.weights import load_model_dir
from lmforge.pipeline.training.export import HFExport, export_checkpoint

pytestmark = pytest.mark.slow


def test_the_export_task_writes_what_the_in_process_export_writes(tmp_path, local_ray):
    cfg = ModelConfig(vocab_size=96, block_size=16, d_model=32, n_head=2, n_layer=2, d_ff=64)
    location, model = gpt_checkpoint(tmp_path / "checkpoints", cfg)
    results = {}
    for in_process in (False, True):
        out = tmp_path / str(in_process)
        hf = HFExport(out_dir=str(out / "hf"), tokenizer_dir=None, eos_token_id=0)
        results[in_process] = export_checkpoint(
            location, cfg, str(out / "model"), hf, in_process=in_process
        )
        assert results[in_process]["export_in_process"] is in_process
        assert results[in_process]["export_format"] == "hf-gpt2"
    task, here = (
        load_model_dir(tmp_path / "False" / "model"),
        load_model_dir(tmp_path / "True" / "model"),
    )
    for name, tensor in model.state_dict().items():
        assert torch.equal(task.state_dict()[name], tensor), name
        assert torch.equal(here.state_dict()[name], tensor), name
    for side in ("False", "True"):
        with safe_open(str(tmp_path / side / "hf" / "model.safetensors"), "pt") as f:
            assert torch.equal(f.get_tensor("transformer.wte.weight"), model.wte.weight.detach())
    assert results[False]["export_rss_rise_bytes"] > 0  # measured in the task's own process
