"""Word blocklist: whole words from a file, case-insensitive; the shipped default loads."""

import pytest

from lmforge.pipeline.filters.blocklist import (
    BlocklistConfig,
    BlocklistFilter,
    default_blocklist_path,
    load_blocklist,
)


def test_the_default_list_ships_with_the_package_and_is_short():
    words = load_blocklist(default_blocklist_path())
    assert 5 <= len(words) <= 50
    assert all(w == w.lower() and not w.startswith("#") for w in words)


def test_a_blocklisted_word_drops_the_document_in_any_case(good_prose, doc_of):
    f = BlocklistFilter()
    assert f.filter(doc_of(good_prose)) is True
    assert f.filter(doc_of(good_prose + " What the FUCK was that?")) == (False, "blocklist_word")


def test_words_that_merely_contain_an_entry_pass(tmp_path, doc_of):
    path = tmp_path / "words.txt"
    path.write_text("# comment\nhell\nbad phrase\n", encoding="utf-8")
    f = BlocklistFilter(BlocklistConfig(path=str(path)))
    assert f.filter(doc_of("Hello from the shell of Michelle.")) is True
    assert f.filter(doc_of("What the hell.")) == (False, "blocklist_word")
    assert f.filter(doc_of("A Bad  phrase here.")) is True  # phrases match as written
    assert f.filter(doc_of("A bad phrase here.")) == (False, "blocklist_word")


def test_min_matches_tolerates_a_single_occurrence(tmp_path, doc_of):
    path = tmp_path / "words.txt"
    path.write_text("darn\n", encoding="utf-8")
    f = BlocklistFilter(BlocklistConfig(path=str(path), min_matches=2))
    assert f.filter(doc_of("Darn it.")) is True
    assert f.filter(doc_of("Darn it, darn it.")) == (False, "blocklist_word")


def test_a_missing_file_fails_naming_the_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.filters.blocklist.path"):
        BlocklistFilter(BlocklistConfig(path=str(tmp_path / "nope.txt")))
