"""Byte-level BPE tokenizer: training, saving/loading, the document convention, packing, shards.

Start here:
- `train_bpe(texts, TokenizerConfig(...))` learns a tokenizer from a stream of documents;
- `save_tokenizer` / `load_tokenizer` write and read it (HF-loadable);
- `encode_documents` is the one way a document becomes ids (`<|endoftext|>` first);
- `tokenize_partition` writes one shard of a split, `write_split_index` indexes the split once
  its shards are committed, `TokenDataset` reads windows back.
"""

from lmforge.tokenizer.config import EOT, EOT_ID, PAD, PAD_ID, TokenizerConfig
from lmforge.tokenizer.convention import decode_ids, encode_document, encode_documents, eot_id
from lmforge.tokenizer.dataset import TokenDataset, split_token_counts
from lmforge.tokenizer.describe import TokenPiece, describe_tokens, format_tokens
from lmforge.tokenizer.io import (
    TOKENIZER_FILES,
    load_hf_tokenizer,
    load_tokenizer,
    save_tokenizer,
)
from lmforge.tokenizer.packing import PackedStream, num_windows, pack_documents, token_dtype, window
from lmforge.tokenizer.partition import tokenize_partition
from lmforge.tokenizer.shards import ShardInfo, TokenShard, TokenShardWriter, read_shard
from lmforge.tokenizer.split_index import index_committed_shards, write_split_index
from lmforge.tokenizer.stats import tokenizer_stats
from lmforge.tokenizer.train import train_bpe

__all__ = [
    "EOT",
    "EOT_ID",
    "PAD",
    "PAD_ID",
    "TOKENIZER_FILES",
    "PackedStream",
    "ShardInfo",
    "TokenDataset",
    "TokenPiece",
    "TokenShard",
    "TokenShardWriter",
    "TokenizerConfig",
    "decode_ids",
    "describe_tokens",
    "encode_document",
    "encode_documents",
    "eot_id",
    "format_tokens",
    "index_committed_shards",
    "load_hf_tokenizer",
    "load_tokenizer",
    "num_windows",
    "pack_documents",
    "read_shard",
    "save_tokenizer",
    "split_token_counts",
    "token_dtype",
    "tokenize_partition",
    "tokenizer_stats",
    "train_bpe",
    "window",
    "write_split_index",
]
