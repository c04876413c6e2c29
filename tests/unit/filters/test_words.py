"""The shared word split: remembered pieces and texts change nothing and stay bounded."""

from lmforge.pipeline.filters import words
from lmforge.pipeline.filters.words import has_alpha, is_word, split_tokens, text_tokens


def test_the_split_follows_spacy_english_shapes():
    assert split_tokens("Don't stop (e.g. U.S. well-known) 3.14... cannot") == (
        "Do", "n't", "stop", "(", "e.g.", "U.S.", "well", "-", "known", ")", "3.14", "...",
        "can", "not",
    )  # fmt: skip


def test_words_and_alphabetic_words_are_those_of_the_tokens(good_prose):
    text = good_prose + " 1999 (42) -- ok."
    split = text_tokens(text)
    assert split.words == tuple(t for t in split.tokens if is_word(t))
    assert split.n_alpha_words == sum(has_alpha(w) for w in split.words)


def test_remembering_pieces_and_texts_stays_bounded(monkeypatch):
    monkeypatch.setattr(words, "PIECE_MEMO_SIZE", 10)
    monkeypatch.setattr(words, "RECENT_TOKENS", 50)
    texts = [f"text {i}: the quick brown fox (number {i}) jumps." for i in range(40)]
    first = [split_tokens(t) for t in texts]
    assert len(words._PIECES) <= 10
    assert words._recent_count <= 50 and len(words._recent) <= 50
    assert [split_tokens(t) for t in texts] == first
