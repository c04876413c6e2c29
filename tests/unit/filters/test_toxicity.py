"""Offline toxicity classifier: toxic documents dropped, scores recorded, batches consistent."""

from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.toxicity import ToxicityConfig, ToxicityFilter, split_chunks

TOXIC = "You are a worthless piece of shit and a fucking idiot, go to hell you stupid bitch."


def test_benign_prose_passes_and_toxic_text_fails(good_prose, doc_of):
    f = ToxicityFilter()
    benign = doc_of(good_prose)
    toxic = doc_of(TOXIC)
    assert f.filter(benign) is True
    assert f.filter(toxic) == (False, "toxicity")
    assert benign.meta["toxicity"] < 0.5 < toxic.meta["toxicity"]


def test_a_toxic_passage_is_not_diluted_by_a_long_benign_document(good_prose, doc_of):
    long_doc = doc_of("\n\n".join([good_prose] * 6 + [TOXIC] + [good_prose] * 6))
    assert ToxicityFilter().filter(long_doc) == (False, "toxicity")


def test_batch_and_single_decisions_agree(good_prose):
    texts = [good_prose, TOXIC, good_prose.upper(), "Have a lovely day, friend."]
    single = [ToxicityFilter().filter(Document(str(i), t, "")) for i, t in enumerate(texts)]
    batch = ToxicityFilter().filter_batch([Document(str(i), t, "") for i, t in enumerate(texts)])
    assert single == batch


def test_threshold_is_config(doc_of):
    assert (
        ToxicityFilter(ToxicityConfig(threshold=1.0)).filter(doc_of("Have a lovely day.")) is True
    )


def test_chunks_cover_the_text_exactly():
    text = "\n".join(f"line {i} " * 7 for i in range(200))
    chunks = split_chunks(text, 300)
    assert "".join(chunks) == text
    assert max(map(len, chunks)) <= 300
