"""`lmforge tokenize-text`: the tokens of a string, shown as the exact text they stand for."""

from __future__ import annotations

from tokenizers import Tokenizer

from lmforge.tokenizer import EOT, describe_tokens, format_tokens
from lmforge.tokenizer.describe import token_bytes


def test_pieces_are_the_tokens_in_order_and_their_bytes_rebuild_the_text(tok: Tokenizer) -> None:
    text = "The transformer 🤗 reads\n\n  中文 <|user|>"
    pieces = describe_tokens(tok, text)
    assert [p.id for p in pieces] == tok.encode(text).ids
    assert b"".join(token_bytes(tok, p.id) for p in pieces) == text.encode("utf-8")
    assert sum(p.n_bytes for p in pieces) == len(text.encode("utf-8"))
    assert " transformer" in [p.text for p in pieces]


def test_a_character_split_across_tokens_shows_its_bytes_in_hex(tok: Tokenizer) -> None:
    pieces = describe_tokens(tok, "🤗")  # F0 9F A4 97, never merged in the tiny corpus
    assert "".join(p.text for p in pieces) == "<0xF0><0x9F><0xA4><0x97>"


def test_as_document_prepends_the_end_of_text_token(tok: Tokenizer) -> None:
    pieces = describe_tokens(tok, "hi", as_document=True)
    assert pieces[0].id == 0 and pieces[0].text == EOT
    assert pieces[1:] == describe_tokens(tok, "hi")


def test_format_shows_a_count_then_one_line_per_token(tok: Tokenizer) -> None:
    pieces = describe_tokens(tok, "a transformer\n")
    lines = format_tokens(pieces).splitlines()
    assert lines[0] == f"{len(pieces)} tokens, 14 bytes"  # a, space, transformer, newline
    assert len(lines) == len(pieces) + 1
    assert lines[-1].split() == [str(pieces[-1].id), repr("\n")]
