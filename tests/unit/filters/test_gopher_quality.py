"""Gopher quality rules on crafted documents that must pass and must fail."""

import pytest

from lmforge.pipeline.filters.gopher_quality import GopherQualityConfig, GopherQualityFilter


def check(text, doc_of, **overrides):
    return GopherQualityFilter(GopherQualityConfig(**overrides)).filter(doc_of(text))


def test_ordinary_prose_passes(good_prose, doc_of):
    assert check(good_prose, doc_of) is True


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("The cat sat on the mat and the dog ran to the door.", "gopher_too_few_words"),
        ("a an I to be of " * 20 + "the and", "gopher_short_mean_word_length"),
        ("Supercalifragilistic extraordinarily " * 40 + "the and", "gopher_long_mean_word_length"),
        ("the #trend of #tags and #more " * 15, "gopher_too_many_hashes"),
        ("and then the story goes on... " * 15, "gopher_too_many_ellipses"),
        ("\n".join(["- the item of value and price"] * 15), "gopher_too_many_bullet_lines"),
        (
            "\n".join(["the line goes on and on…"] * 5 + ["A plain line of the text."] * 9),
            "gopher_too_many_ellipsis_lines",
        ),
        ("the price and value " + "1234 5678 9012 3456 " * 20, "gopher_too_few_alpha_words"),
        ("Lorem dolor sit amet consectetur adipiscing elit " * 10, "gopher_too_few_stop_words"),
    ],
)
def test_each_rule_drops_the_documents_it_targets(text, reason, doc_of):
    assert check(text, doc_of) == (False, reason)


def test_stop_words_count_whatever_their_case(doc_of):
    text = "The cat And dog " + "walked slowly around gardens " * 15
    assert check(text, doc_of) is True


def test_a_rule_set_to_none_is_switched_off(doc_of):
    text = "Lorem dolor sit amet consectetur adipiscing elit " * 10
    assert check(text, doc_of, min_stop_words=None) is True
