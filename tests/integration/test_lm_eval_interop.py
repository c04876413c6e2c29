"""The HF export runs unchanged under lm-evaluation-harness, offline, on the task the
`perplexity` stage writes, and its per-token perplexity agrees with ours within 1%."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.hf_export import export_hf
from lmforge.model.weights import save_model_dir
from lmforge.pipeline.evaluation.trained_model import TrainedModel, score_documents
from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.pipeline.stages.perplexity.lm_eval_task import TASK, write_task
from lmforge.tokenizer.config import TokenizerConfig
from lmforge.tokenizer.convention import eot_id
from lmforge.tokenizer.io import save_tokenizer
from lmforge.tokenizer.train import train_bpe

pytestmark = pytest.mark.integration


def test_lm_eval_harness_perplexity_agrees_with_ours(tmp_path):
    texts = [d.text for d in embedded_documents() if 300 < len(d.text) < 3000]
    tok = train_bpe(texts[:300], TokenizerConfig(vocab_size=600))
    save_tokenizer(tok, tmp_path / "tok", model_max_length=64)
    torch.manual_seed(0)
    model = GPT(
        ModelConfig(
            vocab_size=tok.get_vocab_size(), block_size=64, d_model=32, n_head=2, n_layer=2, d_ff=64
        )
    )
    save_model_dir(model, tmp_path / "pretrain" / "model")
    export_hf(model, tmp_path / "hf", str(tmp_path / "tok"), eos_token_id=eot_id(tok))
    docs = texts[300:312]
    write_task(tmp_path / "task", tmp_path / "task", docs)

    ours = score_documents(TrainedModel(tmp_path / "pretrain", tmp_path / "tok"), docs)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lm_eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tmp_path / 'hf'},dtype=float32",
            "--include_path",
            str(tmp_path / "task"),
            "--tasks",
            TASK,
            "--device",
            "cpu",
            "--batch_size",
            "1",
            "--output_path",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    bits_per_byte = results["results"][TASK]["bits_per_byte,none"]
    their_nll = bits_per_byte * math.log(2) * ours.bytes
    their_token_perplexity = math.exp(their_nll / ours.tokens)
    print(f"lm-eval {their_token_perplexity:.4f} vs lmforge {ours.perplexity:.4f}")
    assert abs(their_token_perplexity / ours.perplexity - 1) < 0.01
