"""bench/scaling_law.py's parts that run without a sweep: the corpus of Python sources, the
clean settings that suit code, and budgets sized to a time target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_modules import load_bench

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.document import Document
from lmforge.pipeline.filters.chain import FilterChainConfig, build_filter_chain, run_chain

bench = load_bench("scaling_law")

SOURCE = '''"""A module docstring that says what the module is for."""


def add(a: int, b: int) -> int:
    """Return the sum of a and b."""
    return a + b
'''


def test_the_corpus_is_every_source_once_in_jsonl_shards(tmp_path):
    root = tmp_path / "site-packages"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text(SOURCE)
    (root / "pkg" / "sub" / "copy.py").write_text(SOURCE)  # vendored copy: kept once
    (root / "pkg" / "b.py").write_text(SOURCE.replace("add", "mul").replace("+", "*"))
    (root / "pkg" / "empty.py").write_text("\n")
    (root / "pkg" / "latin1.py").write_bytes(b"x = '\xe9'\n")
    (root / "pkg" / "notes.txt").write_text("not python")
    stats = bench.build_corpus(root, tmp_path / "out", target_bytes=10**6)
    rows = [
        json.loads(line) for f in sorted((tmp_path / "out").glob("*.jsonl")) for line in f.open()
    ]
    assert [r["id"] for r in rows] == ["pkg/a.py", "pkg/b.py"]
    assert rows[0]["text"] == SOURCE
    assert (stats.files, stats.shards) == (2, 1)
    assert stats.bytes == sum(len(r["text"].encode()) for r in rows)


def test_the_corpus_stops_at_its_target_size(tmp_path):
    root = tmp_path / "site-packages"
    root.mkdir()
    for i in range(20):
        (root / f"m{i:02d}.py").write_text(SOURCE + f"\nVALUE = {i}\n")
    stats = bench.build_corpus(root, tmp_path / "out", target_bytes=3 * len(SOURCE))
    assert stats.files == 3


def test_the_code_filters_keep_python_sources_that_the_default_chain_drops():
    sources = sorted((Path(__file__).resolve().parents[3] / "pipeline" / "scaling").glob("*.py"))
    docs = [Document(id=p.name, text=p.read_text(encoding="utf-8")) for p in sources]

    def kept(*overrides: str) -> int:
        filters = compose(["preset=small", *overrides])["data"]["filters"]
        return len(list(run_chain(docs, build_filter_chain(FilterChainConfig.from_dict(filters)))))

    assert kept() == 0  # the web-text chain: no code passes
    assert kept(*bench.CODE_FILTERS) >= 0.8 * len(docs)
    filters = compose(["preset=small", *bench.CODE_FILTERS])["data"]["filters"]
    assert filters["length"]["enabled"] and filters["gopher_repetition"]["enabled"]


def test_budgets_fit_the_time_target_at_the_probes_rate():
    ladder = bench.size_budgets(10_000, 6e6, target_s=45 * 60, budgets=3, shapes=4, ratio=3)
    assert len(ladder.budgets) == 3
    assert ladder.budgets[1] == pytest.approx(3 * ladder.budgets[0])
    assert ladder.heldout == pytest.approx(3 * ladder.budgets[-1])
    assert ladder.planned_s == pytest.approx(45 * 60)
    with pytest.raises(ValueError, match="raise the target"):
        bench.size_budgets(10_000, 6e6, target_s=600, overhead_s=60)
