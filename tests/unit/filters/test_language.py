"""Offline language identification keeps configured languages above a confidence."""

import pytest

from lmforge.pipeline.filters.language import LanguageConfig, LanguageFilter

GERMAN = (
    "Der Garten hinter der alten Bibliothek ist ein ruhiger Ort für die Menschen der Stadt "
    "geworden. Jedes Frühjahr kommen Freiwillige mit Samen und Werkzeug."
)
FRENCH = (
    "Le jardin derrière la vieille bibliothèque est devenu un lieu calme pour les habitants de "
    "la ville. Chaque printemps, des bénévoles arrivent avec des graines et des outils."
)


def test_english_is_kept_and_annotated(good_prose, doc_of):
    doc = doc_of(good_prose)
    assert LanguageFilter().filter(doc) is True
    assert doc.meta["language"] == "en"
    assert doc.meta["language_confidence"] >= 0.65


@pytest.mark.parametrize(("text", "code"), [(GERMAN, "de"), (FRENCH, "fr")])
def test_other_languages_are_dropped(text, code, doc_of):
    doc = doc_of(text)
    assert LanguageFilter().filter(doc) == (False, "language_other")
    assert doc.meta["language"] == code


def test_configured_languages_are_kept(doc_of):
    f = LanguageFilter(LanguageConfig(languages=("en", "de")))
    assert f.filter(doc_of(GERMAN)) is True


def test_text_without_letters_has_no_language(doc_of):
    assert LanguageFilter().filter(doc_of("1234 5678 ++ -- 42")) == (False, "language_unknown")


def test_a_confidence_above_any_detection_drops_everything(good_prose, doc_of):
    f = LanguageFilter(LanguageConfig(min_confidence=1.01))
    assert f.filter(doc_of(good_prose)) == (False, "language_low_confidence")


def test_a_restricted_candidate_set_works_and_must_contain_the_kept_languages(doc_of):
    f = LanguageFilter(LanguageConfig(candidate_languages=("en", "de", "fr", "es")))
    assert f.filter(doc_of(FRENCH)) == (False, "language_other")
    with pytest.raises(ValueError, match="candidate_languages"):
        LanguageFilter(LanguageConfig(candidate_languages=("de", "fr")))


def test_an_unknown_language_code_fails_naming_the_key():
    with pytest.raises(ValueError, match="data.filters.language.languages"):
        LanguageFilter(LanguageConfig(languages=("xx",)))


def test_all_languages_can_be_candidates(doc_of):
    danish = "Haven bag det gamle bibliotek er blevet et stille sted for byens folk om sommeren."
    doc = doc_of(danish)
    assert LanguageFilter(LanguageConfig(candidate_languages=None)).filter(doc) == (
        False,
        "language_other",
    )
    assert doc.meta["language"] == "da"
