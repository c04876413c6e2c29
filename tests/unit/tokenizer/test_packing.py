"""Packing (B6): documents back to back, windows of block_size + 1 tokens sharing one token."""

from __future__ import annotations

import numpy as np
import pytest

from lmforge.tokenizer import num_windows, pack_documents, token_dtype, window

DOCS = [[0, 5, 6, 7], [0, 8], [0, 9, 10, 11, 12, 13], [0]]


def test_packing_concatenates_documents_and_records_where_each_starts() -> None:
    packed = pack_documents(DOCS)
    assert packed.tokens.tolist() == [0, 5, 6, 7, 0, 8, 0, 9, 10, 11, 12, 13, 0]
    assert packed.doc_starts.tolist() == [0, 4, 6, 12]
    assert all(packed.tokens[s] == 0 for s in packed.doc_starts)


def test_packing_nothing_gives_empty_arrays() -> None:
    packed = pack_documents([])
    assert packed.tokens.shape == (0,) and packed.doc_starts.shape == (0,)


def test_windows_are_block_plus_one_long_and_consecutive_windows_share_one_token() -> None:
    tokens = np.arange(23)
    block = 5
    n = num_windows(len(tokens), block)
    assert n == 4  # windows start at 0, 5, 10, 15; the last ends at token 20, 21 and 22 unused
    for i in range(n):
        w = window(tokens, i, block)
        assert w.tolist() == list(range(i * block, i * block + block + 1))
    for i in range(n - 1):
        assert window(tokens, i, block)[-1] == window(tokens, i + 1, block)[0]
    with pytest.raises(IndexError):
        window(tokens, n, block)


@pytest.mark.parametrize(
    ("n_tokens", "block", "expected"),
    [(0, 4, 0), (1, 4, 0), (4, 4, 0), (5, 4, 1), (8, 4, 1), (9, 4, 2), (1000, 1, 999)],
)
def test_number_of_windows(n_tokens: int, block: int, expected: int) -> None:
    assert num_windows(n_tokens, block) == expected


def test_window_is_a_view_not_a_copy() -> None:
    tokens = np.arange(10)
    assert np.shares_memory(window(tokens, 1, 3), tokens)


def test_token_dtype_is_uint16_when_the_vocabulary_fits_else_uint32() -> None:
    assert token_dtype(4096) == np.uint16
    assert token_dtype(65536) == np.uint16
    assert token_dtype(65537) == np.uint32
    with pytest.raises(ValueError):
        token_dtype(0)
