"""The one document convention: every document is `<|endoftext|>` followed by its tokens.

Packed back to back, documents read `EOT d1 EOT d2 EOT d3 ...`: the end-of-text token separates
documents (B6) and also starts the first one, so every document, wherever it lands in the stream,
is predicted from the same context as at evaluation time. Neither the saved `tokenizer.json` nor
the HF tokenizer adds anything (no post-processor); these functions add EOT, and only they do.

Who calls this (and nothing else) to turn a document into ids:
- the `tokenize` stage, to write training and validation shards;
- the `perplexity` stage, to score a held-out document;
- the HF export, whose users must reproduce it as `[tok.bos_token_id] + tok(text).input_ids`
  (`bos_token` is saved as `<|endoftext|>`; see `lmforge.tokenizer.io`).

A document that literally contains the text `<|endoftext|>` gets the EOT id at that point, in this
path and in HF alike (both match special tokens in text by default).
"""

from __future__ import annotations

from collections.abc import Sequence

from tokenizers import Tokenizer

from lmforge.tokenizer.config import EOT


def eot_id(tok: Tokenizer) -> int:
    """Id of `<|endoftext|>` (0 for tokenizers built by `train_bpe`)."""
    token_id = tok.token_to_id(EOT)
    if token_id is None:
        raise ValueError(f"tokenizer has no {EOT} token; train it with lmforge.tokenizer.train_bpe")
    return token_id


def encode_document(tok: Tokenizer, text: str) -> list[int]:
    """`[eot_id] + ids(text)`: the ids one document contributes to a token stream."""
    return [eot_id(tok), *tok.encode(text, add_special_tokens=False).ids]


def encode_documents(tok: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """`encode_document` for many texts at once, in parallel inside `tokenizers` (rayon threads)."""
    eot = eot_id(tok)
    texts = list(texts)
    # encode_batch_fast skips character offsets, which packing never needs.
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    return [[eot, *enc.ids] for enc in encode(texts, add_special_tokens=False)]


def decode_ids(tok: Tokenizer, ids: Sequence[int]) -> str:
    """Text of `ids`, special tokens kept, so `decode_ids(tok, tok.encode(x).ids) == x` exactly."""
    return tok.decode(list(ids), skip_special_tokens=False)
