"""The interpolated Kneser-Ney trigram: a proper distribution over the vocabulary in every
context, the formulas of Chen & Goodman on a corpus small enough to count by hand, and a better
baseline than the bigram on text with second-order structure."""

import math

import numpy as np
import pytest

import lmforge.pipeline.probes.kneser_ney as kneser_ney
import lmforge.pipeline.probes.position_scorer as position_scorer
from lmforge.pipeline.probes.kneser_ney import KneserNeyTrigramLM, discount
from lmforge.pipeline.probes.ngram import BigramLM


def next_token_probs(lm: KneserNeyTrigramLM, before: int, prev: int) -> np.ndarray:
    v = lm.vocab_size
    return np.exp(lm.log_probs(np.full(v, before), np.full(v, prev), np.arange(v)))


def test_probabilities_sum_to_one_over_the_vocabulary_in_every_context():
    rng = np.random.default_rng(3)
    vocab = 9  # token 8 never occurs: it lives on the uniform floor
    seqs = [rng.integers(0, 8, size=int(rng.integers(2, 25))) for _ in range(12)]
    lm = KneserNeyTrigramLM.fit(seqs, vocab)
    for before in range(vocab + 1):  # vocab = the start marker
        for prev in range(vocab):
            probs = next_token_probs(lm, before, prev)
            assert abs(probs.sum() - 1.0) < 1e-12, (before, prev)
            assert probs.min() > 0
    assert next_token_probs(lm, 0, 1)[8] > 0  # the unseen token keeps a floor


def test_the_formulas_on_a_corpus_counted_by_hand():
    # sequences a b c and a b d, V = 5 (e never occurs); start marker S before a.
    a, b, c, d, e = range(5)
    lm = KneserNeyTrigramLM.fit([[a, b, c], [a, b, d]], vocab_size=5)
    d1, d2, d3 = lm.discounts
    # continuation counts: bigrams (S)a-b... seen in trigrams: S a b (x2), a b c, a b d
    # N1+(. a b) = 1 (S), N1+(. b c) = 1, N1+(. b d) = 1; unigram N1+(. b)=1, N1+(. c)=1, N1+(. d)=1
    p1_c = (1 - d1) / 3 + d1 * 3 / 3 / 5
    p1_e = d1 * 3 / 3 / 5
    p2_c = (1 - d2) / 2 + d2 * 2 / 2 * p1_c  # after b: N1+(. b .) = 2, two types
    p3_c = (1 - d3) / 2 + d3 * 2 / 2 * p2_c  # c(a b .) = 2, two types
    assert math.exp(lm.log_probs([a], [b], [c])[0]) == pytest.approx(p3_c, rel=1e-12)
    p2_e = d2 * 2 / 2 * p1_e
    assert math.exp(lm.log_probs([a], [b], [e])[0]) == pytest.approx(d3 * p2_e, rel=1e-12)
    # an unseen context falls back to the order below: (c, b) never occurred as a context
    assert math.exp(lm.log_probs([c], [b], [c])[0]) == pytest.approx(p2_c, rel=1e-12)
    # the first prediction of a sequence has the start marker as context: c(S a b) = 2 of 2
    p_first = np.exp(lm.token_log_probs([a, b])[0])
    assert p_first > 0.5


def test_discount_comes_from_counts_of_counts():
    assert discount(np.array([1, 1, 1, 2, 5])) == pytest.approx(3 / (3 + 2 * 1))
    assert discount(np.array([1, 1, 3])) == kneser_ney.DEFAULT_DISCOUNT


def test_trigram_beats_the_bigram_on_text_with_second_order_structure():
    rng = np.random.default_rng(0)
    vocab = 20
    table = rng.integers(0, vocab, size=(vocab, vocab))  # next token = table[t-2, t-1]

    def sample(n: int) -> np.ndarray:
        seq = list(rng.integers(0, vocab, size=2))
        for _ in range(n):
            seq.append(int(table[seq[-2], seq[-1]]) if rng.random() < 0.9 else rng.integers(vocab))
        return np.array(seq)

    train, val = [sample(4000) for _ in range(5)], [sample(2000)]
    kn = KneserNeyTrigramLM.fit(train, vocab).cross_entropy(val)
    bigram = BigramLM.fit(train, vocab, k=0.1).cross_entropy(val)
    assert kn < 0.6 * bigram


def test_counts_are_the_same_when_folded_in_many_chunks(monkeypatch):
    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, 30, size=int(rng.integers(1, 40))) for _ in range(100)]
    whole = KneserNeyTrigramLM.fit(seqs, vocab_size=30)
    monkeypatch.setattr(position_scorer, "_FLUSH_PAIRS", 7)
    chunked = KneserNeyTrigramLM.fit(seqs, vocab_size=30)
    np.testing.assert_array_equal(whole.trigram_codes, chunked.trigram_codes)
    np.testing.assert_array_equal(whole.trigram_counts, chunked.trigram_counts)
    assert whole.trigram_counts.sum() == sum(max(len(s) - 1, 0) for s in seqs)
    assert whole.cross_entropy(seqs) == pytest.approx(chunked.cross_entropy(seqs), rel=1e-12)
