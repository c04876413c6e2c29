"""The unigram/bigram baselines (F4) reproduce the seed's bigram MLE example (T6) and score the
transformer's positions."""

import math

import numpy as np
import pytest

from lmforge.pipeline.probes.ngram import BigramLM, UnigramLM, ngram_baselines, with_leading_eot

T6_CORPUS = [
    "<s> Antoine écoute Thom </s>",
    "<s> Denis écoute une autre chanson </s>",
    "<s> Elle écoute une chanson de Lionel </s>",
]


def encode_words(sentences: list[str]) -> tuple[list[list[int]], dict[str, int]]:
    vocab: dict[str, int] = {}
    seqs = [[vocab.setdefault(w, len(vocab)) for w in s.split()] for s in sentences]
    return seqs, vocab


@pytest.mark.parametrize(
    ("prev", "word", "expected"),
    [
        ("<s>", "Antoine", 1 / 3),
        ("Antoine", "écoute", 1.0),
        ("écoute", "une", 2 / 3),
        ("une", "chanson", 1 / 2),
        ("chanson", "</s>", 1 / 2),
    ],
)
def test_bigram_mle_matches_seed_example_t6(prev, word, expected):
    seqs, vocab = encode_words(T6_CORPUS)
    lm = BigramLM.fit(seqs, vocab_size=len(vocab), k=0)
    assert lm.prob(vocab[word], prev=vocab[prev]) == pytest.approx(expected)


def test_bigram_mle_rows_sum_to_one_for_every_seen_context():
    seqs, vocab = encode_words(T6_CORPUS)
    lm = BigramLM.fit(seqs, vocab_size=len(vocab), k=0)
    for prev in set(vocab) - {"</s>"}:  # </s> is never a context
        total = sum(lm.prob(vocab[w], prev=vocab[prev]) for w in vocab)
        assert total == pytest.approx(1.0), prev


def test_add_k_smoothing_gives_unseen_pairs_k_over_context_plus_kv():
    seqs, vocab = encode_words(T6_CORPUS)
    v = len(vocab)
    lm = BigramLM.fit(seqs, vocab_size=v, k=0.5)
    # c(écoute) = 3 as a context, c(écoute Lionel) = 0
    assert lm.prob(vocab["Lionel"], prev=vocab["écoute"]) == pytest.approx(0.5 / (3 + 0.5 * v))
    assert lm.prob(vocab["une"], prev=vocab["écoute"]) == pytest.approx(2.5 / (3 + 0.5 * v))


def test_unigram_counts_only_predicted_positions():
    seqs, vocab = encode_words(T6_CORPUS)
    lm = UnigramLM.fit(seqs, vocab_size=len(vocab), k=0)
    assert lm.prob(vocab["<s>"]) == 0.0  # always the first token, never predicted
    assert lm.prob(vocab["écoute"]) == pytest.approx(3 / 17)  # 4 + 6 + 7 predicted tokens
    assert lm.prob(vocab["</s>"]) == pytest.approx(3 / 17)


def test_cross_entropy_is_mean_nats_over_next_token_positions():
    seqs, vocab = encode_words(T6_CORPUS)
    lm = BigramLM.fit(seqs, vocab_size=len(vocab), k=0)
    sentence = [vocab[w] for w in ["<s>", "Antoine", "écoute", "une", "chanson", "</s>"]]
    expected = -(
        math.log(1 / 3) + math.log(1) + math.log(2 / 3) + math.log(1 / 2) + math.log(1 / 2)
    )
    assert lm.cross_entropy([sentence]) == pytest.approx(expected / 5)
    assert lm.nll([sentence]) == (pytest.approx(expected), 5)


def test_mle_gives_infinite_cross_entropy_to_an_unseen_pair_and_smoothing_keeps_it_finite():
    seqs, vocab = encode_words(T6_CORPUS)
    unseen = [[vocab["<s>"], vocab["Lionel"]]]
    assert BigramLM.fit(seqs, len(vocab), k=0).cross_entropy(unseen) == math.inf
    assert math.isfinite(BigramLM.fit(seqs, len(vocab), k=1).cross_entropy(unseen))


def test_bigram_beats_unigram_on_text_with_strong_local_structure():
    rng = np.random.default_rng(0)

    # A cyclic language: token t is almost always followed by (t + 1) mod 50.
    def draw(n: int) -> np.ndarray:
        start = rng.integers(0, 50)
        steps = np.where(rng.random(n) < 0.95, 1, rng.integers(0, 50, size=n))
        return (start + np.cumsum(steps)) % 50

    train = [draw(200) for _ in range(50)]
    val = [draw(200) for _ in range(5)]
    stats = ngram_baselines(train, val, vocab_size=50, k=1)
    assert stats["bigram_cross_entropy"] < 0.5 * stats["unigram_cross_entropy"]
    assert stats["unigram_cross_entropy"] == pytest.approx(math.log(50), rel=0.02)
    assert stats["bigram_perplexity"] == pytest.approx(math.exp(stats["bigram_cross_entropy"]))


def test_counts_are_the_same_when_folded_in_many_chunks(monkeypatch):
    import lmforge.pipeline.probes.position_scorer as position_scorer

    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, 30, size=int(rng.integers(1, 40))) for _ in range(100)]
    whole = BigramLM.fit(seqs, vocab_size=30)
    monkeypatch.setattr(position_scorer, "_FLUSH_PAIRS", 7)
    chunked = BigramLM.fit(seqs, vocab_size=30)
    np.testing.assert_array_equal(whole.pair_codes, chunked.pair_codes)
    np.testing.assert_array_equal(whole.pair_counts, chunked.pair_counts)
    assert whole.pair_counts.sum() == sum(max(len(s) - 1, 0) for s in seqs)


def test_token_id_outside_the_vocabulary_is_rejected_with_the_vocab_size():
    with pytest.raises(ValueError, match=r"token id 12 .*\[0, 10\)"):
        BigramLM.fit([[1, 2, 12]], vocab_size=10)


def test_sequences_too_short_to_predict_anything_raise():
    lm = BigramLM.fit([[1, 2, 3]], vocab_size=5)
    with pytest.raises(ValueError, match="no predicted positions"):
        lm.cross_entropy([[1], []])


def test_leading_eot_makes_the_first_token_of_each_document_a_predicted_position():
    docs = [[5, 6], [7]]
    assert [d.tolist() for d in with_leading_eot(docs, eot_id=0)] == [[0, 5, 6], [0, 7]]
    lm = BigramLM.fit(with_leading_eot(docs, eot_id=0), vocab_size=8, k=0)
    assert lm.prob(5, prev=0) == lm.prob(7, prev=0) == 0.5
    assert lm.nll(with_leading_eot(docs, eot_id=0))[1] == 3  # 2 + 1 document tokens
