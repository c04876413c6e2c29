"""The synthetic corpus has the structure it claims: 5% exact and 20% near copies of earlier
originals, near copies at word-5-gram Jaccard 0.7-0.9, distinct originals, the same bytes for
the same seed; and it reads back through the real source reader."""

from __future__ import annotations

import itertools

import pytest

from lmforge.pipeline.estimate.calibration.synthetic_corpus import jaccard, synthesize
from lmforge.pipeline.filters.minhash import shingle_hashes
from lmforge.pipeline.sources.files import read_source

DOCS, FILES = 600, 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(directory, planted structure, id -> text read back from the files)."""
    out = tmp_path_factory.mktemp("synth")
    planted = synthesize(out, DOCS, FILES, seed=7)
    texts = {
        doc.id: doc.text
        for path in sorted(out.glob("*.jsonl.zst"))
        for doc in read_source(str(path))
    }
    return out, planted, texts


def text_of(corpus, index: int) -> str:
    _, planted, texts = corpus
    return texts[planted["id_format"].format(index)]


def test_every_document_is_written_once_across_the_files(corpus):
    out, planted, texts = corpus
    assert sorted(p.name for p in out.glob("*.jsonl.zst")) == planted["files"]
    assert len(planted["files"]) == FILES
    assert sorted(texts) == [planted["id_format"].format(i) for i in range(DOCS)]


def test_five_percent_exact_and_twenty_percent_near_copies_of_earlier_originals(corpus):
    _, planted, _ = corpus
    exact, near = planted["exact"], planted["near"]
    # Only copies that fall before any original of the first block become originals.
    assert 0.045 * DOCS <= len(exact) <= 0.05 * DOCS
    assert 0.19 * DOCS <= len(near) <= 0.2 * DOCS
    copies = [e[0] for e in exact] + [n[0] for n in near]
    assert len(set(copies)) == len(copies)
    sources = {e[1] for e in exact} | {n[1] for n in near}
    assert not sources & set(copies), "copies are made of originals only"
    assert all(source < copy for copy, source, *_ in exact + near)


def test_exact_copies_equal_their_original(corpus):
    _, planted, _ = corpus
    for copy, source in planted["exact"]:
        assert text_of(corpus, copy) == text_of(corpus, source)


def test_near_copies_sit_at_word_5_gram_jaccard_between_0_7_and_0_9(corpus):
    _, planted, _ = corpus
    measured = []
    for copy, source, recorded in planted["near"]:
        a, b = text_of(corpus, copy), text_of(corpus, source)
        words_a, words_b = a.split(), b.split()
        shingles_a = {tuple(words_a[i : i + 5]) for i in range(len(words_a) - 4)}
        shingles_b = {tuple(words_b[i : i + 5]) for i in range(len(words_b) - 4)}
        whitespace_jaccard = len(shingles_a & shingles_b) / len(shingles_a | shingles_b)
        assert 0.7 <= jaccard(a, b) <= 0.9
        assert jaccard(a, b) == pytest.approx(recorded, abs=1e-4)
        assert 0.6 <= whitespace_jaccard <= 0.95
        measured.append(recorded)
    assert max(measured) - min(measured) > 0.1, "targets spread over the range"


def test_originals_are_far_apart(corpus):
    _, planted, texts = corpus
    copies = {e[0] for e in planted["exact"]} | {n[0] for n in planted["near"]}
    originals = [text_of(corpus, i) for i in range(DOCS) if i not in copies]
    assert len(set(originals)) == len(originals)
    shingles = [set(shingle_hashes(text, 5).tolist()) for text in originals]
    worst = max(len(a & b) / len(a | b) for a, b in itertools.combinations(shingles, 2))
    assert worst < 0.5


def test_the_same_seed_gives_the_same_bytes_and_another_seed_others(corpus, tmp_path):
    out, _, _ = corpus
    again = synthesize(tmp_path / "again", DOCS, FILES, seed=7, workers=2)
    for name in again["files"] + ["planted.json"]:
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes()
    other = synthesize(tmp_path / "other", DOCS, FILES, seed=8)
    assert (tmp_path / "other" / other["files"][0]).read_bytes() != (
        out / other["files"][0]
    ).read_bytes()
