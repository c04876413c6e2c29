"""C4 rules: sentence-like lines are kept, boilerplate lines removed, some pages dropped."""

from lmforge.pipeline.filters.c4 import C4Config, C4Filter, count_sentences

PROSE = [
    "The river rises in the hills and runs south to the sea.",
    "Farmers along its banks grow rice, maize and beans.",
    "In winter the water is low and the fish move to deeper pools.",
    "Boats carry goods between the villages when the roads are flooded.",
    "Most people in the valley have learned to swim as children.",
]


def test_prose_passes_unchanged_with_its_paragraphs(good_prose, doc_of):
    doc = doc_of(good_prose)
    assert C4Filter().filter(doc) is True
    assert doc.text == good_prose


def test_lines_without_terminal_punctuation_short_lines_and_boilerplate_are_removed(doc_of):
    text = "\n".join(
        ["Home | About | Contact", "Read more"]
        + PROSE
        + [
            "Please enable JavaScript to view the comments.",
            "This site uses cookies to improve your experience.",
            "To be continued...",
            "Ok.",
        ]
    )
    f = C4Filter()
    doc = doc_of(text)
    assert f.filter(doc) is True
    assert doc.text == "\n".join(PROSE)
    assert f.counts.events == {
        "c4_line_no_terminal_punct": 2,
        "c4_line_too_few_words": 2,
        "c4_line_javascript": 1,
        "c4_line_policy": 1,
    }


def test_citation_marks_are_stripped(doc_of):
    doc = doc_of("\n".join(PROSE[:4] + ["The bridge was built in 1901.[3][citation needed]"]))
    assert C4Filter().filter(doc) is True
    assert doc.text.endswith("The bridge was built in 1901.")


def test_lorem_ipsum_drops_the_page(doc_of):
    text = "\n".join(PROSE + ["Lorem ipsum dolor sit amet, consectetur adipiscing elit."])
    assert C4Filter().filter(doc_of(text)) == (False, "c4_lorem_ipsum")


def test_a_curly_bracket_drops_the_page(doc_of):
    text = "\n".join(PROSE + ["The function returns {x: 1} when it is called."])
    assert C4Filter().filter(doc_of(text)) == (False, "c4_curly_bracket")


def test_too_few_sentences_left_drops_the_page(doc_of):
    text = "\n".join(PROSE[:3] + ["Menu", "Login", "Share this"])
    assert C4Filter().filter(doc_of(text)) == (False, "c4_too_few_sentences")
    assert C4Filter(C4Config(min_sentences=3)).filter(doc_of(text)) is True


def test_switched_off_rules_keep_their_lines(doc_of):
    cfg = C4Config(drop_javascript_lines=False, drop_curly_bracket=False, min_sentences=None)
    text = "Enable JavaScript to see {the} menu here."
    doc = doc_of(text)
    assert C4Filter(cfg).filter(doc) is True
    assert doc.text == text


def test_sentences_are_counted_at_their_ends():
    assert count_sentences("One here. Two here! Three here? Four.") == 4
    assert count_sentences("Version 3.14 is out.") == 1
