"""Compression statistics of a tokenizer on a text sample (reported for the validation split).

- `bytes_per_token`: UTF-8 bytes of text per token; higher means the tokenizer compresses more.
- `tokens_per_word`: tokens per whitespace-separated word (fertility); 1.0 is one token a word.
- `vocab_used_fraction`: share of the vocabulary's ids that occur at least once in the sample;
  ids never used are embedding rows the model never trains.
Texts are encoded as they are, without the document separator, so the figures describe text only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice

import numpy as np
from tokenizers import Tokenizer

BATCH = 512


def tokenizer_stats(tok: Tokenizer, texts: Iterable[str]) -> dict[str, float | int]:
    """Stream `texts` once and return vocab_size, bytes_per_token, tokens_per_word, usage counts."""
    vocab_size = tok.get_vocab_size()
    used = np.zeros(vocab_size, dtype=bool)
    n_docs = n_bytes = n_words = n_tokens = 0
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    for batch in _batches(texts, BATCH):
        encodings = encode(batch, add_special_tokens=False)
        ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), dtype=np.int64)
        used[ids] = True
        n_docs += len(batch)
        n_tokens += len(ids)
        n_bytes += sum(len(t.encode("utf-8")) for t in batch)
        n_words += sum(len(t.split()) for t in batch)
    return {
        "vocab_size": vocab_size,
        "bytes_per_token": n_bytes / n_tokens if n_tokens else 0.0,
        "tokens_per_word": n_tokens / n_words if n_words else 0.0,
        "vocab_used_fraction": float(used.sum()) / vocab_size,
        "n_docs": n_docs,
        "n_bytes": n_bytes,
        "n_words": n_words,
        "n_tokens": n_tokens,
    }


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(texts)
    while batch := list(islice(it, size)):
        yield batch
