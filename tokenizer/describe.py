"""Show how a string splits into tokens (`lmforge tokenize-text "..."`).

Each token is shown as the exact bytes it stands for, decoded as UTF-8 where they form whole
characters and as `<0xNN>` where a character is split across tokens (byte-level BPE may cut an
emoji or a CJK character in the middle). `token_byte_lengths` counts those bytes for every id at
once, for the bits per byte of a scored token stream.
"""

from __future__ import annotations

import codecs
from typing import NamedTuple

import numpy as np
from tokenizers import Tokenizer

from lmforge.tokenizer.convention import encode_document


class TokenPiece(NamedTuple):
    """One token of a string: its id and the text it stands for."""

    id: int
    text: str
    """The token's bytes as UTF-8, with `<0xNN>` for each byte of a split character."""
    n_bytes: int
    """How many bytes of text the token stands for."""


def _byte_level_alphabet() -> dict[str, int]:
    """The printable character that byte-level BPE uses for each byte (GPT-2's byte map)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + shifted)
            shifted += 1
    return {c: b for b, c in chars.items()}


_CHAR_TO_BYTE = _byte_level_alphabet()


def _bytes_as_hex(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeDecodeError):
        raise err
    return "".join(f"<0x{b:02X}>" for b in err.object[err.start : err.end]), err.end


_HEX_ERRORS = "lmforge.tokenizer.hexbytes"
codecs.register_error(_HEX_ERRORS, _bytes_as_hex)


def token_bytes(tok: Tokenizer, token_id: int) -> bytes:
    """The bytes of text that `token_id` stands for (a special token stands for its own name)."""
    token = tok.id_to_token(token_id)
    if token is None:
        raise ValueError(f"token id {token_id} is outside the vocabulary ({tok.get_vocab_size()})")
    if token_id in tok.get_added_tokens_decoder():
        return token.encode("utf-8")
    return bytes(_CHAR_TO_BYTE[c] for c in token)


def token_byte_lengths(tok: Tokenizer) -> np.ndarray:
    """UTF-8 bytes of text that each id stands for, int64 [vocab_size]; 0 for special tokens,
    which decoding for text (`skip_special_tokens`) leaves out. `lengths[ids].sum()` is the byte
    count of the text of `ids`, the denominator of bits per byte, without decoding it."""
    special = {i for i, added in tok.get_added_tokens_decoder().items() if added.special}
    lengths = np.zeros(tok.get_vocab_size(), dtype=np.int64)
    for i in range(lengths.size):
        lengths[i] = 0 if i in special else len(token_bytes(tok, i))
    return lengths


def describe_tokens(tok: Tokenizer, text: str, *, as_document: bool = False) -> list[TokenPiece]:
    """The tokens of `text` in order; `as_document` prepends `<|endoftext|>` as training does."""
    ids = (
        encode_document(tok, text)
        if as_document
        else tok.encode(text, add_special_tokens=False).ids
    )
    pieces = []
    for i in ids:
        raw = token_bytes(tok, i)
        pieces.append(TokenPiece(i, raw.decode("utf-8", errors=_HEX_ERRORS), len(raw)))
    return pieces


def format_tokens(pieces: list[TokenPiece]) -> str:
    """One line per token, `id  'text'`, under a count of tokens and bytes."""
    n_bytes = sum(p.n_bytes for p in pieces)
    lines = [f"{len(pieces)} tokens, {n_bytes} bytes"]
    lines += [f"{p.id:>7}  {p.text!r}" for p in pieces]
    return "\n".join(lines)
