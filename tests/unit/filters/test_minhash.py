"""MinHash near-dedup: planted near-duplicates found, distinct documents left alone."""

import random

import numpy as np
import pytest

from lmforge.pipeline.filters.minhash import (
    EMPTY,
    MinHashConfig,
    MinHashDeduplicator,
    index_bytes_per_document,
    lsh_band_keys,
    minhash_signatures,
    near_duplicate_clusters,
)

BOILERPLATE = "Subscribe to our newsletter for the latest news, offers and updates."
N_DOCS = 300


def planted_corpus(seed: int) -> tuple[list[str], list[str]]:
    """N_DOCS distinct ~300-word documents, then one near-copy of each (1 word in 50 replaced,
    a boilerplate line added). Ids sort originals first."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(5000)]
    weights = [1 / (rank + 1) for rank in range(len(vocab))]  # Zipf-like word frequencies
    originals = [" ".join(rng.choices(vocab, weights, k=300)) for _ in range(N_DOCS)]
    copies = []
    for text in originals:
        words = text.split()
        for i in rng.sample(range(len(words)), len(words) // 50):
            words[i] = rng.choice(vocab)
        copies.append(" ".join(words) + "\n" + BOILERPLATE)
    texts = originals + copies
    return [f"doc{i:04d}" for i in range(len(texts))], texts


@pytest.mark.parametrize("seed", [0, 1])
def test_planted_near_duplicates_are_found_and_distinct_documents_kept(seed):
    ids, texts = planted_corpus(seed)
    removed = MinHashDeduplicator().duplicates(ids, texts)
    found = sum(removed.get(ids[N_DOCS + i]) == ids[i] for i in range(N_DOCS))
    wrongly_merged = sum(
        1 for gone, kept in removed.items() if int(gone[3:]) - N_DOCS != int(kept[3:])
    )
    assert found / N_DOCS >= 0.9
    assert wrongly_merged / N_DOCS <= 0.01


def test_signatures_do_not_depend_on_how_documents_are_partitioned():
    ids, texts = planted_corpus(2)
    cfg = MinHashConfig()
    whole = minhash_signatures(texts, cfg)
    parts = np.concatenate([minhash_signatures(texts[i : i + 37], cfg) for i in range(0, 600, 37)])
    assert np.array_equal(whole, parts)
    keys = lsh_band_keys(parts, cfg)
    shuffled = np.random.default_rng(0).permutation(len(ids))
    assert near_duplicate_clusters(ids, keys, parts, cfg) == near_duplicate_clusters(
        [ids[i] for i in shuffled], keys[shuffled], parts[shuffled], cfg
    )


def test_a_cluster_keeps_its_smallest_id_and_maps_every_other_member_to_it():
    text = "the quick brown fox jumps over the lazy dog near the river bank today " * 5
    ids = ["c", "a", "b", "z"]
    texts = [text, text + " extra", text, "an entirely different document about other things"]
    removed = MinHashDeduplicator().duplicates(ids, texts)
    assert removed == {"b": "a", "c": "a"}


def test_documents_without_words_are_never_merged():
    sigs = minhash_signatures(["", "...", "real words here"], MinHashConfig())
    assert (sigs[:2] == EMPTY).all() and (sigs[2] != EMPTY).all()
    assert MinHashDeduplicator().duplicates(["a", "b", "c"], ["", "!!", "..."]) == {}


def test_short_documents_are_one_shingle_and_word_order_matters():
    dedup = MinHashDeduplicator()
    assert dedup.duplicates(["a", "b"], ["hello world", "Hello, world!"]) == {"b": "a"}
    assert dedup.duplicates(["a", "b"], ["hello world", "world hello"]) == {}


def test_the_index_holds_hashes_only_and_reports_its_size():
    cfg = MinHashConfig()
    sigs = minhash_signatures(["some text " * 50], cfg)
    keys = lsh_band_keys(sigs, cfg)
    assert sigs.dtype == np.uint32 and keys.dtype == np.uint64
    assert index_bytes_per_document(cfg) == sigs[0].nbytes + keys[0].nbytes == 560


def test_bands_times_rows_must_equal_num_perm():
    with pytest.raises(ValueError, match="bands x rows"):
        MinHashConfig(bands=10, rows=5, num_perm=100)
    assert MinHashConfig.from_dict({"bands": 14, "rows": 8, "num_perm": 112}).rows == 8
