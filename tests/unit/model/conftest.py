"""Tiny models for the model unit tests, built in code (CPU, seconds)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT

TINY = {"vocab_size": 97, "block_size": 32, "d_model": 32, "n_head": 4, "n_layer": 2, "d_ff": 128}


def build_model(*, seed: int = 0, lively: bool = True, **overrides: Any) -> GPT:
    """A tiny GPT in eval mode. `lively` re-draws weights with a larger std so that greedy
    decoding does not just repeat the last token (GPT-2 init at this size barely moves logits)."""
    torch.manual_seed(seed)
    model = GPT(ModelConfig(**{**TINY, **overrides}))
    if lively:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, 0.3)
                elif "ln" not in name:
                    p.normal_(0.0, 0.1)
    return model.eval()


@pytest.fixture
def make_model() -> Callable[..., GPT]:
    """build_model(seed=0, lively=True, **ModelConfig overrides) for tests that need variants."""
    return build_model


@pytest.fixture(autouse=True)
def single_thread() -> Iterator[None]:
    """Tiny matrices gain nothing from intra-op threads, and on a busy 2-core machine thread
    hand-offs dominate; restored after each test so other suites keep their setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
