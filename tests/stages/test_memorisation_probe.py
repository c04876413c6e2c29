"""Controlled memorisation: a model trained until it memorises a canary shows high exposure,
a freshly initialised one low exposure (Carlini et al. 2019)."""

from __future__ import annotations

import torch

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.weights import save_model_dir
from lmforge.pipeline.evaluation.trained_model import TrainedModel
from lmforge.pipeline.probes.memorisation import canary_exposures, make_canaries
from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.tokenizer.config import TokenizerConfig
from lmforge.tokenizer.convention import encode_document
from lmforge.tokenizer.io import save_tokenizer
from lmforge.tokenizer.train import train_bpe


def _trained_model(tmp_path, prose, texts, steps):
    # As in the pipeline, the tokenizer never sees the canaries: a secret merged into one token
    # would make it more probable than any candidate for a reason that is not memorisation.
    tok = train_bpe(prose, TokenizerConfig(vocab_size=400))
    save_tokenizer(tok, tmp_path / "tok", model_max_length=32)
    torch.manual_seed(0)
    model = GPT(
        ModelConfig(
            vocab_size=tok.get_vocab_size(),
            block_size=32,
            d_model=64,
            n_head=4,
            n_layer=2,
            d_ff=128,
        )
    )
    stream = torch.tensor([t for text in texts for t in encode_document(tok, text)])
    windows = stream[: (len(stream) - 1) // 32 * 32 + 1]
    x = windows[:-1].view(-1, 32)
    y = windows[1:].view(-1, 32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(steps):
        rows = torch.randint(0, len(x), (16,), generator=torch.Generator().manual_seed(step))
        _, loss = model(x[rows], y[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    save_model_dir(model, tmp_path / "pretrain" / "model")
    return TrainedModel(tmp_path / "pretrain", tmp_path / "tok")


def test_a_memorised_canary_has_high_exposure_and_a_fresh_model_low(tmp_path):
    canaries = make_canaries(1, seed=3, repeats=(100,))
    prose = [d.text[:400] for d in embedded_documents()][:60]
    texts = prose + [c.text for c in canaries for _ in range(c.repeats)]
    memorising = _trained_model(tmp_path / "trained", prose, texts, steps=300)
    fresh = _trained_model(tmp_path / "fresh", prose, texts, steps=0)
    high = canary_exposures(canaries, memorising.logprobs, n_candidates=255, seed=0)
    low = canary_exposures(canaries, fresh.logprobs, n_candidates=255, seed=0)
    top = high["max_measurable_exposure"]  # log2(256) = 8 bits: the canary ranks first
    assert high["mean_exposure_by_repeats"][100] >= top - 1.0
    assert low["mean_exposure_by_repeats"][100] <= top / 2
