"""Tokenizer training on a hash-chosen sample of the clean train split (`tokenizer.sample_bytes`).

The documents are written as real clean shards; their ids are ones that `split_of` sends to the
train split at val_fraction 0.5, so a sample that reused the train/val hash would come out empty.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from lmforge.pipeline.document import Document
from lmforge.pipeline.sources.hash_sample import HashSample
from lmforge.pipeline.sources.parquet_shards import ShardWriter, iter_texts, split_of
from lmforge.pipeline.stages.train_tokenizer.stage import train_on_sample
from lmforge.tokenizer import TokenizerConfig, save_tokenizer, train_bpe

SYLLABLES = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "ve", "zu", "bar", "den", "fol"]


def make_documents(n_docs: int = 600, seed: int = 0) -> list[Document]:
    rng = random.Random(seed)
    words = ["".join(rng.choices(SYLLABLES, k=rng.randint(1, 4))) for _ in range(400)]
    docs, i = [], 0
    while len(docs) < n_docs:
        doc_id = f"web/{i}"
        i += 1
        if split_of(doc_id, 0.5) != "train":
            continue
        text = " ".join(rng.choices(words, k=rng.randint(10, 80))) + "."
        docs.append(Document(id=doc_id, text=text, source="web"))
    return docs


def write_split(out_dir: Path, docs: list[Document], docs_per_shard: int) -> Path:
    out_dir.mkdir(parents=True)
    writer = ShardWriter(out_dir, "train", docs_per_shard)
    for doc in docs:
        writer.add(doc)
    writer.close()
    return out_dir


@pytest.fixture(scope="module")
def documents() -> list[Document]:
    return make_documents()


@pytest.fixture(scope="module")
def total_bytes(documents: list[Document]) -> int:
    return sum(len(d.text.encode("utf-8")) for d in documents)


def sampled_texts(clean_dir: Path, sample_bytes: int) -> tuple[list[str], HashSample]:
    sample = HashSample(clean_dir, "train", sample_bytes, exclude_sources=("canary",))
    return list(sample), sample


def config(sample_bytes: int) -> TokenizerConfig:
    return TokenizerConfig(vocab_size=400, sample_bytes=sample_bytes)


def test_same_input_twice_gives_a_byte_identical_tokenizer_json(
    tmp_path: Path, documents: list[Document], total_bytes: int
) -> None:
    clean = write_split(tmp_path / "clean", documents, docs_per_shard=100)
    files = []
    for run in ("a", "b"):
        tok, stats, _ = train_on_sample(clean, config(total_bytes // 3))
        save_tokenizer(tok, tmp_path / run, model_max_length=128)
        files.append((tmp_path / run / "tokenizer.json").read_bytes())
        assert 0 < stats.sample_docs < len(documents)
    assert files[0] == files[1]


def test_the_sample_does_not_depend_on_how_the_split_is_sharded(
    tmp_path: Path, documents: list[Document], total_bytes: int
) -> None:
    few = write_split(tmp_path / "few", documents, docs_per_shard=500)
    many = write_split(tmp_path / "many", documents, docs_per_shard=37)
    shuffled = list(documents)
    random.Random(1).shuffle(shuffled)
    reordered = write_split(tmp_path / "reordered", shuffled, docs_per_shard=64)
    budget = total_bytes // 4
    texts_few, _ = sampled_texts(few, budget)
    texts_many, _ = sampled_texts(many, budget)
    texts_reordered, _ = sampled_texts(reordered, budget)
    assert 0 < len(texts_few) < len(documents)
    assert texts_few == texts_many
    assert sorted(texts_reordered) == sorted(texts_few)
    tok_few, *_ = train_on_sample(few, config(budget))
    tok_many, *_ = train_on_sample(many, config(budget))
    assert tok_few.to_str() == tok_many.to_str()


@pytest.mark.parametrize("fraction", [0.1, 0.3, 0.6])
def test_the_sample_holds_about_sample_bytes_of_text(
    tmp_path: Path, documents: list[Document], total_bytes: int, fraction: float
) -> None:
    clean = write_split(tmp_path / "clean", documents, docs_per_shard=100)
    budget = int(total_bytes * fraction)
    texts, sample = sampled_texts(clean, budget)
    stats = sample.stats()
    assert stats.split_bytes == total_bytes
    assert stats.split_docs == len(documents)
    assert stats.sample_bytes == sum(len(t.encode("utf-8")) for t in texts)
    assert stats.sample_docs == len(texts)
    assert 0.75 * budget <= stats.sample_bytes <= 1.25 * budget


@pytest.mark.parametrize("extra", [0, 1, 10**12])
def test_a_budget_at_least_the_split_takes_every_document_like_unsampled_training(
    tmp_path: Path, documents: list[Document], total_bytes: int, extra: int
) -> None:
    clean = write_split(tmp_path / "clean", documents, docs_per_shard=100)
    tok, stats, _ = train_on_sample(clean, config(total_bytes + extra))
    assert (stats.sample_docs, stats.sample_bytes) == (len(documents), total_bytes)
    unsampled = train_bpe(iter_texts(clean, "train"), config(0))
    assert tok.to_str() == unsampled.to_str()


def test_zero_means_all_of_the_text(
    tmp_path: Path, documents: list[Document], total_bytes: int
) -> None:
    clean = write_split(tmp_path / "clean", documents, docs_per_shard=100)
    texts, sample = sampled_texts(clean, 0)
    assert texts == [d.text for d in documents]
    assert sample.stats().split_bytes == sample.stats().sample_bytes == total_bytes


def test_canaries_are_neither_sampled_nor_counted(
    tmp_path: Path, documents: list[Document], total_bytes: int
) -> None:
    canaries = [
        Document(id=f"canary/{i}", text=f"secret {i:06d}", source="canary") for i in range(300)
    ]
    clean = write_split(tmp_path / "clean", [*documents, *canaries], docs_per_shard=100)
    for budget in (0, total_bytes // 2):
        texts, sample = sampled_texts(clean, budget)
        assert not any(t.startswith("secret") for t in texts)
        assert sample.stats().split_docs == len(documents)


def test_a_negative_sample_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="sample_bytes"):
        TokenizerConfig(sample_bytes=-1)


def test_the_tiny_preset_trains_on_all_of_its_text_and_the_default_on_a_sample() -> None:
    from lmforge.pipeline.config_tree import compose, section
    from lmforge.pipeline.stages.train_tokenizer.stage import TRAINING_KEYS, parse

    def typed(preset: str):
        config = compose([f"preset={preset}"])
        return parse({path: section(config, path) for path in TRAINING_KEYS})

    assert typed("tiny").sample_bytes == 0
    assert typed("small").sample_bytes > 0
