"""The word-level signs of degenerate text: one word filling a completion, a word 4-gram looping,
and low distinct-2 over the pooled words of a setting's samples."""

import pytest

from lmforge.pipeline.probes.diversity import max_ngram_count, top_word_share, word_degeneracy


def test_top_word_share_is_the_most_frequent_whitespace_word_over_all_words():
    assert top_word_share("the cat and the dog and the end") == pytest.approx(3 / 8)
    assert top_word_share("the\n\n\nthe\nthe  the") == 1.0  # newlines are whitespace
    assert top_word_share("   ") == 0.0


def test_max_ngram_count_counts_overlapping_occurrences_of_the_commonest_ngram():
    loop = "a b c d " * 4 + "a b c d"
    assert max_ngram_count(loop.split(), 4) == 5
    assert max_ngram_count(["one", "two", "three", "four", "five"], 4) == 1
    assert max_ngram_count(["too", "short"], 4) == 0


def test_word_degeneracy_reports_the_worst_completion_and_pooled_distinct_2():
    fine = "the return value of the current frame object"
    stuck = "the value of the value of the value of the value of the value"
    stats = word_degeneracy([fine, stuck])
    assert stats["max_top_word_share"] == pytest.approx(5 / 14)  # "the" in the stuck one
    assert stats["max_word_4gram_count"] == 4  # "the value of the" x4 (and "value of the value")
    # 7 + 13 word bigrams; distinct: the 7 of `fine` and "the value" ("value of", "of the" shared)
    assert stats["word_distinct_2"] == pytest.approx(8 / 20)
    assert word_degeneracy([fine])["word_distinct_2"] == 1.0


def test_word_degeneracy_needs_a_completion():
    with pytest.raises(ValueError, match="at least one"):
        word_degeneracy([])
