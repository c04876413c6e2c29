"""The greedy loop rate: prompts from validation sentence starts, the bar's test for one
completion, the Wilson interval, and a model that loops against one that does not."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from bench_modules import load_bench

from lmforge.model.config import ModelConfig
from lmforge.model.gpt import GPT
from lmforge.model.weights import save_model_dir
from lmforge.tokenizer.config import TokenizerConfig
from lmforge.tokenizer.convention import encode_document
from lmforge.tokenizer.io import save_tokenizer
from lmforge.tokenizer.train import train_bpe

bench = load_bench("greedy_loops")


def test_sentence_starts_take_capitalised_openings_of_long_sentences_once():
    texts = [
        "The list type holds items in order. Short one. lower case starts here and goes on.",
        "The list type holds items in order again. A 3rd word is not plain here at all.",
        "Return a new\nlist of the items given. Is it here? Yes, it is here too!",
    ]
    assert bench.sentence_starts(texts, 10) == ["Return a new", "The list type"]


def test_sentence_starts_spread_over_the_sorted_openings():
    texts = [f"Word{c} alpha beta gamma delta epsilon." for c in "abcdefghij"]
    texts = [t.replace("Word", "Wor") for t in texts]  # "Wora" ... "Worj": plain words
    starts = bench.sentence_starts(texts, 5)
    assert starts == [f"Wor{c} alpha beta" for c in "acegi"]
    # 10 openings for 4 prompts: indices 0, 2, 5, 7 reach the end of the sorted list.
    assert bench.sentence_starts(texts, 4) == [f"Wor{c} alpha beta" for c in "acfh"]
    assert len(bench.sentence_starts(texts, 20)) == 10
    assert bench.sentence_starts(texts, 0) == []


def test_a_completion_loops_only_past_three_repeats_of_a_word_4gram():
    assert not bench.loops(" of items" * 4 + " end")  # "of items of items" occurs 3 times
    assert bench.loops(" of items" * 5)  # and 4 times here
    assert not bench.loops(" a b c d e f g h i j k l m n o p")


def test_wilson_interval_matches_known_values():
    assert bench.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert bench.wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert bench.wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    with pytest.raises(ValueError):
        bench.wilson_interval(0, 0)


def test_loop_figures_count_the_looping_share():
    completions = [" of items" * 5, " a b c d", " x y" * 6, " p q r s t"]
    figures = bench.loop_figures(["A", "B", "C", "D"], completions)
    assert figures["greedy_loop_rate"] == 0.5
    assert figures["greedy_loop_prompts"] == 4
    low, high = figures["greedy_loop_rate_ci"]
    assert low < 0.5 < high
    assert figures["most_repetitive"] == "C" + " x y" * 6  # "x y x y" occurs 5 times


LOOP = "it is a list " * 40
PROSE = [
    "The list type holds items in order and keeps them there.",
    "Return a new dictionary built from the given pairs of keys.",
    "A tuple cannot change once it has been created by the call.",
]


def _run(tmp_path, trained_steps: int) -> dict:
    """Loop figures of a run whose model is random (0 steps: untied, since tied embeddings
    make a fresh model repeat its last token) or has learnt to repeat LOOP."""
    tok = train_bpe(PROSE + [LOOP], TokenizerConfig(vocab_size=300))
    save_tokenizer(tok, tmp_path / "tok", model_max_length=32)
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=tok.get_vocab_size(),
        block_size=32,
        d_model=64,
        n_head=4,
        n_layer=2,
        d_ff=128,
        tie_weights=trained_steps > 0,
    )
    model = GPT(cfg)
    ids = torch.tensor(encode_document(tok, LOOP))
    x = torch.stack([ids[i : i + 32] for i in range(0, len(ids) - 33, 3)])
    y = torch.stack([ids[i + 1 : i + 33] for i in range(0, len(ids) - 33, 3)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(trained_steps):
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    save_model_dir(model, tmp_path / "pretrain" / "model")
    clean = tmp_path / "clean"
    clean.mkdir()
    table = pa.table({"text": PROSE, "source": ["doc"] * len(PROSE)})
    pq.write_table(table, clean / "val-00000.parquet")
    sample = tmp_path / "sample"
    sample.mkdir()
    config = {"eval.sample": {"prompts": ["it is", "The list"], "max_new_tokens": 24}}
    (sample / "manifest.json").write_text(json.dumps({"config": config}))
    artifacts = {"pretrain": tmp_path / "pretrain", "train_tokenizer": tmp_path / "tok"}
    return bench.measure({**artifacts, "clean": clean, "sample": sample}, n_prompts=10)


def test_a_model_that_learnt_a_loop_loops_on_every_prompt_and_a_fresh_one_on_none(tmp_path):
    looping = _run(tmp_path / "looping", trained_steps=60)
    fresh = _run(tmp_path / "fresh", trained_steps=0)
    # The run's two sample prompts and the three sentence starts of its validation split.
    assert looping["greedy_loop_prompts"] == fresh["greedy_loop_prompts"] == 5
    assert looping["greedy_loop_rate"] == 1.0, looping["most_repetitive"]
    assert "it is a list it is a list" in looping["most_repetitive"]
    assert fresh["greedy_loop_rate"] == 0.0, fresh["most_repetitive"]
    assert looping["greedy_mean_max_4gram_count"] > 3 >= fresh["greedy_mean_max_4gram_count"]
