"""A small English corpus built in code and one tokenizer trained on it, shared as fixtures.

The corpus repeats the word 'transformer' far more than any other long word; the tokenizer has
one user special token, `<|user|>`.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from lmforge.tokenizer import TokenizerConfig, save_tokenizer, train_bpe

_SUBJECTS = [
    "the transformer",
    "a small transformer",
    "the language model",
    "every attention head",
    "the tokenizer",
    "our decoder",
    "this transformer",
]
_VERBS = ["predicts", "reads", "encodes", "learns", "attends to", "generates", "compresses"]
_OBJECTS = [
    "the next token",
    "every word of the sentence",
    "long documents",
    "the training data",
    "a sequence of bytes",
    "the hidden state",
    "the transformer output",
]
_TAILS = ["quickly", "in parallel", "one step at a time", "with a causal mask", "again"]


def build_corpus(n_sentences: int = 400, seed: int = 0) -> list[str]:
    """Deterministic sentences in which 'transformer' is by far the most frequent long word."""
    rng = random.Random(seed)
    corpus = []
    for i in range(n_sentences):
        sentence = " ".join(
            [rng.choice(_SUBJECTS).capitalize(), rng.choice(_VERBS), rng.choice(_OBJECTS)]
        )
        corpus.append(f"{sentence} {rng.choice(_TAILS)}, said report {i}.")
    return corpus


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    return build_corpus()


@pytest.fixture(scope="session")
def tok(corpus: list[str]) -> Tokenizer:
    cfg = TokenizerConfig(vocab_size=600, min_frequency=2, special_tokens=["<|user|>"])
    return train_bpe(iter(corpus), cfg)


@pytest.fixture(scope="session")
def saved_dir(tok: Tokenizer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tokenizer")
    save_tokenizer(tok, out, model_max_length=128)
    return out
