"""Encode one partition of documents into one token shard: the unit of work of `tokenize`.

The `tokenize` stage runs one call per partition (as a Ray task); this module knows nothing of
Ray. `tokenizers` encodes each batch on a rayon thread pool sized to all CPUs of the machine:
in a task that reserved fewer CPUs, set `RAYON_NUM_THREADS` in its environment to that count.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from pathlib import Path

from tokenizers import Tokenizer

from lmforge.tokenizer.convention import encode_documents
from lmforge.tokenizer.io import load_tokenizer
from lmforge.tokenizer.shards import ShardInfo, TokenShardWriter

BATCH = 1024
"""Documents encoded per `encode_batch` call; bounds memory for partitions of any size."""


def tokenize_partition(
    tokenizer: Tokenizer | str | Path,
    texts: Iterable[str],
    out_dir: str | Path,
    split: str,
    index: int,
    *,
    batch_size: int = BATCH,
) -> ShardInfo:
    """Encode `texts` by the document convention and commit them as shard `index` of `split`.

    `tokenizer` is a `Tokenizer` or the path of a saved one. Documents keep their order; the
    shard becomes visible only when every document is written (see `TokenShardWriter`).
    """
    tok = tokenizer if isinstance(tokenizer, Tokenizer) else load_tokenizer(tokenizer)
    texts = iter(texts)
    with TokenShardWriter(out_dir, split, index, tok.get_vocab_size()) as writer:
        while batch := list(islice(texts, batch_size)):
            writer.write_documents(encode_documents(tok, batch))
    assert writer.info is not None  # set when the with-block committed the shard
    return writer.info
