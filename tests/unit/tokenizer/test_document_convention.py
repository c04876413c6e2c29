"""One convention everywhere: `<|endoftext|>` starts every document, the first one included."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer
from transformers import AutoTokenizer

from lmforge.tokenizer import (
    TokenDataset,
    encode_document,
    encode_documents,
    eot_id,
    index_committed_shards,
    tokenize_partition,
)

DOCS = ["First document.", "", "Second 🤗 document\n\n  with   spaces", "<|user|> third"]


def test_eot_starts_every_document_including_the_first(tok: Tokenizer) -> None:
    assert eot_id(tok) == 0
    for text in DOCS:
        ids = encode_document(tok, text)
        assert ids[0] == 0
        assert ids[1:] == tok.encode(text).ids
        assert 0 not in ids[1:]


def test_batch_encoding_equals_encoding_documents_one_by_one(tok: Tokenizer) -> None:
    assert encode_documents(tok, DOCS) == [encode_document(tok, t) for t in DOCS]


def test_tokenize_shards_perplexity_and_hf_export_agree_on_document_ids(
    tok: Tokenizer, saved_dir: Path, tmp_path: Path
) -> None:
    # tokenize: what training reads back from the shards, document by document
    tokenize_partition(saved_dir, DOCS, tmp_path, "val", 0, batch_size=2)
    index_committed_shards(tmp_path, "val")
    dataset = TokenDataset(tmp_path, "val", block_size=4)
    tokens = dataset.shards[0].tokens
    bounds = [*dataset.doc_offsets.tolist(), dataset.n_tokens]
    from_shards = [tokens[a:b].tolist() for a, b in zip(bounds, bounds[1:], strict=False)]
    # perplexity: scores a held-out document through encode_document
    from_perplexity = [encode_document(tok, text) for text in DOCS]
    # HF export: a user of the exported tokenizer prepends its bos token, as documented
    hf = AutoTokenizer.from_pretrained(str(saved_dir), local_files_only=True)
    from_hf = [[hf.bos_token_id, *hf(text)["input_ids"]] for text in DOCS]
    assert from_shards == from_perplexity == from_hf
