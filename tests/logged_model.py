"""A tiny pretrain artifact (safetensors model directory) and tokenizer, logged as the pipeline
logs its model, for the tests of the logged MLflow model."""

from __future__ import annotations

from pathlib import Path

import torch

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.weights import save_model_dir
from lmforge.pipeline.engine.tracking import client
from lmforge.pipeline.stages.pretrain.mlflow_model import log_text_generator
from lmforge.tokenizer.config import TokenizerConfig
from lmforge.tokenizer.io import save_tokenizer
from lmforge.tokenizer.train import train_bpe

PROMPTS = ["The Python interpreter", "def f(x):"]


def write_tiny_model(root: Path) -> tuple[Path, Path]:
    """(pretrain dir with `model/`, tokenizer dir) of an untrained, seeded model."""
    texts = ["The Python interpreter reads code. def f(x): return x + 1"] * 20
    tok = train_bpe(texts, TokenizerConfig(vocab_size=300))
    save_tokenizer(tok, root / "tokenizer", model_max_length=128)
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tok.get_vocab_size(), block_size=16, d_model=16, n_head=2, n_layer=1, d_ff=32
    )
    save_model_dir(GPT(config), root / "pretrain" / "model")
    return root / "pretrain", root / "tokenizer"


def log_tiny_model(root: Path) -> tuple[str, str, str, Path, Path]:
    """(tracking URI, run id, model URI, pretrain dir, tokenizer dir) of a freshly logged model."""
    pretrain, tokenizer = write_tiny_model(root)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    mlflow = client(uri)
    experiment = mlflow.create_experiment("model", artifact_location=str(root / "artifacts"))
    run_id = mlflow.create_run(experiment).info.run_id
    return uri, run_id, log_text_generator(uri, run_id, pretrain, tokenizer), pretrain, tokenizer
