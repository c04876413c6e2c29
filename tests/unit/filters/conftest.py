"""Shared crafted documents for the filter tests."""

import pytest

from lmforge.pipeline.document import Document

GOOD_PROSE = (
    "The garden behind the old library has become a quiet place for the people of the town. "
    "Every spring, volunteers arrive with seeds, tools and a plan for the beds along the stone "
    "wall. They plant tomatoes, beans and sunflowers, and they share the harvest with the "
    "families who live nearby.\n\n"
    "Children from the school visit the garden on Friday afternoons. A teacher shows them how to "
    "test the soil, how to water the young plants without drowning them, and why bees matter to "
    "every fruit on the table. Many of the children have never grown anything before, and they "
    "are proud when the first green shoots appear.\n\n"
    "The project started with a small grant and a borrowed wheelbarrow. Today it has a shed, a "
    "rain barrel and a long list of people who want to help. The organisers hope that other "
    "neighbourhoods will follow their example and turn empty corners into places where food and "
    "friendships can grow."
)


@pytest.fixture
def good_prose() -> str:
    """English prose that every default filter keeps."""
    return GOOD_PROSE


def make_doc(text, doc_id: str = "doc-0") -> Document:
    return Document(id=doc_id, text=text, source="test")


@pytest.fixture
def doc_of():
    """Build a Document from a text."""
    return make_doc
