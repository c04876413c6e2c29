"""The base classes count every document and character, by reason, and lose nothing silently."""

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.base import (
    DocumentFilter,
    DocumentTransform,
    DroppedDocument,
    FilterCounts,
)


class DropsOddLengths(DocumentFilter):
    name = "odd"

    def filter(self, doc):
        return True if len(doc.text) % 2 == 0 else (False, "odd_length")


class DropsWithoutReason(DocumentFilter):
    name = "silent"

    def filter(self, doc):
        return False


class Shouts(DocumentTransform):
    name = "shout"

    def transform(self, doc):
        if doc.text == "unfixable":
            return None, "shout_unfixable"
        return doc.text.upper()


def docs(*texts):
    return [Document(id=f"d{i}", text=t, source="s") for i, t in enumerate(texts)]


def test_filter_counts_documents_and_characters_in_and_out():
    step = DropsOddLengths()
    kept = list(step.run(docs("ab", "abc", "abcd", "x")))
    assert [d.text for d in kept] == ["ab", "abcd"]
    c = step.counts
    assert (c.docs_in, c.docs_out, c.chars_in, c.chars_out) == (4, 2, 10, 6)
    assert c.dropped_by_reason == {"odd_length": 2}
    assert c.docs_in == c.docs_out + c.docs_dropped


def test_dropping_without_a_reason_is_counted_under_the_filter_name():
    step = DropsWithoutReason()
    assert step.process(docs("a")[0]) is None
    assert step.counts.dropped_by_reason == {"silent": 1}


def test_every_dropped_document_reaches_the_exclusion_sink_with_id_reason_and_snippet():
    seen: list[DroppedDocument] = []
    step = DropsOddLengths(exclusion_sink=seen.append)
    step.process_batch(docs("ab", "abc" * 101, "x"))
    assert [(d.id, d.step, d.reason) for d in seen] == [
        ("d1", "odd", "odd_length"),
        ("d2", "odd", "odd_length"),
    ]
    assert seen[0].snippet == ("abc" * 101)[:200]
    assert seen[0].source == "s"


def test_transform_rewrites_text_counts_changes_and_can_drop():
    step = Shouts()
    kept = step.process_batch(docs("hello", "HI", "unfixable"))
    assert [d.text for d in kept] == ["HELLO", "HI"]
    assert step.counts.events == {"documents_changed": 1}
    assert step.counts.dropped_by_reason == {"shout_unfixable": 1}


def test_counts_merge_across_partitions_and_survive_a_dict_round_trip():
    a = FilterCounts(4, 3, 40, 30, {"x": 1}, {"lines": 2})
    b = FilterCounts(6, 4, 60, 35, {"x": 1, "y": 1}, {"lines": 1, "other": 5})
    merged = a.merge(b)
    assert merged == FilterCounts(10, 7, 100, 65, {"x": 2, "y": 1}, {"lines": 3, "other": 5})
    assert a == FilterCounts(4, 3, 40, 30, {"x": 1}, {"lines": 2}), "merge must not mutate"
    assert FilterCounts.from_dict(merged.to_dict()) == merged
