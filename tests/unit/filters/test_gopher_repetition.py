"""Gopher repetition rules on crafted documents that must pass and must fail."""

import random
from collections import Counter

import pytest

from lmforge.pipeline.filters.gopher_repetition import (
    GopherRepetitionConfig,
    GopherRepetitionFilter,
    NgramIndex,
    duplicate_elements,
)

VOCAB = [f"{a}{b}" for a in ("ban", "cor", "del", "fim", "gol", "hup") for b in ("ta", "ro", "mi")]


def varied_words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCAB) + rng.choice("klmnprst") for _ in range(n))


def only(**thresholds) -> GopherRepetitionFilter:
    """A filter with every rule off except those given."""
    off = dict(
        max_dup_line_frac=None,
        max_dup_para_frac=None,
        max_dup_line_char_frac=None,
        max_dup_para_char_frac=None,
        top_ngram_max_char_frac=(),
        dup_ngram_max_char_frac=(),
    )
    off.update(thresholds)
    return GopherRepetitionFilter(GopherRepetitionConfig(**off))


def test_ordinary_prose_passes(good_prose, doc_of):
    assert GopherRepetitionFilter().filter(doc_of(good_prose)) is True


def test_duplicate_elements_counts_repeats_after_the_first():
    assert duplicate_elements(["a", "bb", "a", "bb", "a", "c"]) == (3, 4)


def test_many_repeated_lines_fail(doc_of):
    lines = [varied_words(8, i) for i in range(6)] + ["Click here to subscribe now"] * 5
    f = only(max_dup_line_frac=0.3)
    assert f.filter(doc_of("\n".join(lines))) == (False, "gopher_dup_line_frac")
    assert f.filter(doc_of("\n".join(lines[:8]))) is True


def test_repeated_paragraphs_fail_by_count_and_by_characters(doc_of):
    paragraphs = [varied_words(30, i) for i in range(4)]
    repeated = "\n\n".join(paragraphs + [paragraphs[0], paragraphs[1]])
    assert only(max_dup_para_frac=0.3).filter(doc_of(repeated)) == (False, "gopher_dup_para_frac")
    assert only(max_dup_para_char_frac=0.2).filter(doc_of(repeated)) == (
        False,
        "gopher_dup_para_char_frac",
    )
    assert only(max_dup_para_frac=0.3).filter(doc_of("\n\n".join(paragraphs))) is True


def test_a_dominant_bigram_fails_the_top_ngram_rule(doc_of):
    text = varied_words(60, 1) + " " + "buy now " * 30
    assert only(top_ngram_max_char_frac=((2, 0.2),)).filter(doc_of(text)) == (
        False,
        "gopher_top_2_gram",
    )
    assert only(top_ngram_max_char_frac=((2, 0.2),)).filter(doc_of(varied_words(200, 2))) is True


@pytest.mark.parametrize("n", [5, 6, 7, 8, 9, 10])
def test_a_passage_repeated_within_a_line_fails_the_duplicate_ngram_rule(n, doc_of):
    passage = varied_words(40, 3)
    text = varied_words(80, 4) + " " + passage + " " + varied_words(20, 5) + " " + passage
    f = only(dup_ngram_max_char_frac=((n, 0.10),))
    assert f.filter(doc_of(text)) == (False, f"gopher_duplicated_{n}_grams")
    assert f.filter(doc_of(varied_words(200, 6))) is True


def test_duplicate_ngram_characters_count_each_character_once(doc_of):
    # Four copies of a 5-word line: only the last three are duplicates (26 of 123 chars each).
    text = " ".join(["alpha beta gamma delta epsilon"] * 4)
    f = only(dup_ngram_max_char_frac=((5, 0.99),))
    assert f.filter(doc_of(text)) is True
    f = only(dup_ngram_max_char_frac=((5, 0.6),))
    assert f.filter(doc_of(text)) == (False, "gopher_duplicated_5_grams")


def plain_top_chars(tokens: list[str], n: int) -> int:
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    counts = Counter(grams)
    top = max(counts.values(), default=0)
    if top < 2:
        return 0
    first = min(grams.index(g) for g, c in counts.items() if c == top)
    return (sum(map(len, grams[first])) + n - 1) * top


def plain_duplicate_chars(tokens: list[str], n: int) -> int:
    seen, covered = set(), set()
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i : i + n])
        if gram in seen:
            covered.update(range(i, i + n))
        seen.add(gram)
    return sum(len(tokens[i]) for i in covered)


def test_ngram_statistics_equal_the_plain_definitions():
    rng = random.Random(0)
    for _ in range(300):
        vocab = VOCAB[: rng.randint(2, len(VOCAB))]
        tokens = [rng.choice(vocab) for _ in range(rng.randint(0, 120))]
        index = NgramIndex(tuple(tokens))
        order = [("top", n) for n in (2, 3, 4)] + [("dup", n) for n in range(5, 11)]
        if rng.random() < 0.3:
            rng.shuffle(order)  # asked out of order, the narrowing starts over
        for kind, n in order:
            if kind == "top":
                assert index.top_chars(n) == plain_top_chars(tokens, n), (tokens, n)
            else:
                assert index.duplicate_chars(n) == plain_duplicate_chars(tokens, n), (tokens, n)
