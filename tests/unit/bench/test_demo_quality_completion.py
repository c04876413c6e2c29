"""The demo-quality bench names the greedy completion that decides its 4-gram figure."""

from __future__ import annotations

import json

from bench_modules import load_bench

bench = load_bench("demo_quality")


def test_the_greedy_completion_with_the_most_repeated_word_4gram_is_named(tmp_path):
    loop = " it is a list it is a list it is a list it is a list"
    records = [
        {"mode": "greedy", "prompt": "A list is", "completion": " a sequence of items."},
        {"mode": "greedy", "prompt": "The function", "completion": loop},
        {"mode": "top_p", "prompt": "A list is", "completion": " x y z w" * 9},
    ]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert bench.most_repetitive_greedy(samples) == "The function" + loop
