"""Encode one partition of documents into one token shard: the unit of work of `tokenize`.

The `tokenize` stage runs one call per partition (as a Ray task that reserves one CPU); this
module knows nothing of Ray. A partition is encoded on the calling thread (`on_this_thread`):
left to itself, `tokenizers` encodes each batch on a rayon pool that it sizes once per process to
every core, so a task on one CPU would run as many threads as the machine has cores. Setting
`RAYON_NUM_THREADS` instead only works in a process that never encoded before, which is a Ray
task's own environment (a process started for it): each task would pay a process's start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from itertools import islice
from pathlib import Path

from tokenizers import Tokenizer

from lmforge.environ import environ_set
from lmforge.tokenizer.convention import encode_documents
from lmforge.tokenizer.io import load_tokenizer
from lmforge.tokenizer.shards import ShardInfo, TokenShardWriter

BATCH = 1024
"""Documents encoded per `encode_batch` call; bounds memory for partitions of any size."""

PARALLELISM_ENV = "TOKENIZERS_PARALLELISM"
"""Read by `tokenizers` at each batch call: "false" encodes the batch on the calling thread."""


def on_this_thread() -> contextlib.AbstractContextManager[None]:
    """Inside, `tokenizers` encodes on the calling thread; the caller's setting is put back after
    (the process goes on to run other tasks, a tokenizer's training among them)."""
    return environ_set({PARALLELISM_ENV: "false"})


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
    with on_this_thread(), TokenShardWriter(out_dir, split, index, tok.get_vocab_size()) as writer:
        while batch := list(islice(texts, batch_size)):
            writer.write_documents(encode_documents(tok, batch))
    assert writer.info is not None  # set when the with-block committed the shard
    return writer.info
