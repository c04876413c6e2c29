"""The trained model's export from a checkpoint: a small model is written in the calling process
(no Ray task, no worker to start), the model directory loads strictly with the checkpoint's
weights, and the export never imports torch's compiler (1.5 s on two cores)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open
from sharded_checkpoints import gpt_checkpoint

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.weights import load_model_dir
from lmforge.pipeline.training.export import (
    IN_PROCESS_WEIGHTS,
    HFExport,
    export_checkpoint,
    export_memory,
)

CFG = dict(vocab_size=96, block_size=16, d_model=32, n_head=2, n_layer=2, d_ff=64)


@pytest.mark.parametrize("tie_weights", [True, False])
def test_a_small_model_is_exported_in_this_process_and_loads_strictly(tmp_path, tie_weights):
    cfg = ModelConfig(**CFG, tie_weights=tie_weights)
    location, model = gpt_checkpoint(tmp_path / "checkpoints", cfg)
    hf = HFExport(out_dir=str(tmp_path / "hf"), tokenizer_dir=None, eos_token_id=0)
    result = export_checkpoint(location, cfg, str(tmp_path / "model"), hf)
    assert result["export_in_process"] is True
    assert result["export_format"] == "hf-gpt2"
    loaded = load_model_dir(tmp_path / "model")  # strict: no tensor missing or extra
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), "pt") as f:
        assert torch.equal(f.get_tensor("transformer.wte.weight"), model.wte.weight.detach())
        assert ("lm_head.weight" in f.keys()) is not tie_weights  # noqa: SIM118


def test_the_limit_and_the_task_s_memory_follow_the_parameter_count():
    # Which path a model takes, and what its task declares, without building either model.
    small = ModelConfig(**CFG)
    large = ModelConfig(**{**CFG, "d_model": 2048, "n_head": 16, "n_layer": 24, "d_ff": 8192})
    assert 4 * sum(p.numel() for p in GPT(small).parameters()) <= IN_PROCESS_WEIGHTS
    params = 24 * (4 * 2048**2 + 2 * 2048 * 8192)  # the blocks' matrices alone: over 64M
    assert 4 * params > IN_PROCESS_WEIGHTS
    assert export_memory(large) > 1.5 * 4 * params


def test_the_export_does_not_import_torch_s_compiler(tmp_path):
    # Building the model on the meta device to learn its shapes would draw its initial weights
    # there, which imports torch._dynamo: the checkpoint's layout names the shapes instead.
    location, _ = gpt_checkpoint(tmp_path / "checkpoints", ModelConfig(**CFG))
    code = (
        "import json, sys\n"
        "from lmforge.model.config import ModelConfig\n"
        "from lmforge.pipeline.training.export import HFExport, export_checkpoint\n"
        f"cfg = ModelConfig(**{CFG!r})\n"
        f"hf = HFExport({str(tmp_path / 'hf')!r}, None, 0)\n"
        f"export_checkpoint({location!r}, cfg, {str(tmp_path / 'model')!r}, hf)\n"
        "print(json.dumps('torch._dynamo' in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) is False
    assert (tmp_path / "model" / "model.safetensors").is_file()
