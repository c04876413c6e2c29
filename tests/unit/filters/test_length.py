"""Length filter: character and word bounds, each switchable."""

from lmforge.pipeline.filters.length import LengthConfig, LengthFilter


def test_documents_within_bounds_pass(good_prose, doc_of):
    assert LengthFilter().filter(doc_of(good_prose)) is True


def test_too_short_or_too_long_documents_fail_with_their_reason(doc_of):
    f = LengthFilter(LengthConfig(min_chars=10, max_chars=100, min_words=3, max_words=10))
    assert f.filter(doc_of("tiny")) == (False, "length_too_few_chars")
    assert f.filter(doc_of("x" * 101)) == (False, "length_too_many_chars")
    assert f.filter(doc_of("onlytwo words")) == (False, "length_too_few_words")
    assert f.filter(doc_of("a b c d e f g h i j k l")) == (False, "length_too_many_words")
    assert f.filter(doc_of("three little words")) is True


def test_a_none_bound_is_not_checked(doc_of):
    f = LengthFilter(LengthConfig(min_chars=None, max_chars=None, min_words=None, max_words=None))
    assert f.filter(doc_of("")) is True
