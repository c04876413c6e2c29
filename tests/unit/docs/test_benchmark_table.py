"""Benchmark figures are data: docs/benchmarks.md's table is what bench/render_results.py renders
from bench/results.jsonl, the latest run of the shipped settings per bench and machine."""

from __future__ import annotations

import json

import pytest
from bench_modules import load_bench

render = load_bench("render_results")


def test_the_benchmarks_page_is_what_the_results_file_renders():
    page = render.PAGE.read_text(encoding="utf-8")
    assert render.render_page(page, render.load_results()) == page, (
        "docs/benchmarks.md is out of date: run `.venv/bin/python bench/render_results.py`"
    )


def test_every_page_with_a_table_is_what_the_results_file_renders():
    for path, benches in render.PAGES.items():
        page = path.read_text(encoding="utf-8")
        assert render.render_page(page, render.load_results(), benches) == page, (
            f"{path} is out of date: run `.venv/bin/python bench/render_results.py`"
        )


def test_a_page_of_one_bench_shows_its_rows_only_with_its_intervals():
    results = [
        result(ratio=0.9),
        result("scaling_law", runs=12, rel_error=0.02, a=0.5, a_interval=[0.4, 0.6]),
    ]
    table = render.render_table(results, ("scaling_law",))
    assert "train_throughput" not in table
    assert "runs 12, a 0.5, a_interval [0.4, 0.6], rel_error 0.02" in table


def test_every_result_names_its_bench_machine_date_and_command():
    results = render.load_results()
    assert results
    for result in results:
        assert all(result[key] for key in render.REQUIRED)


def result(bench="train_throughput", machine="m1", date="2026-01-01", **figures) -> dict:
    return {"bench": bench, **figures, "machine": machine, "date": date, "command": "x"}


def test_the_table_shows_the_latest_run_per_bench_variant_and_machine_without_experiments():
    results = [
        result(ratio=0.8, date="2026-01-02"),
        result(ratio=0.9, date="2026-01-01"),
        result(ratio=0.95, date="2026-01-02"),  # the same date: the later line counts
        result(ratio=2.0, date="2026-01-03", overrides=["train.lr=1"]),  # an experiment
        result(ratio=0.7, machine="m2"),
        result(ratio=0.6, model="tiny"),
    ]
    shown = render.current(results)
    assert [(r["machine"], r.get("model"), r["ratio"]) for r in shown] == [
        ("m1", None, 0.95),
        ("m2", None, 0.7),
        ("m1", "tiny", 0.6),
    ]
    table = render.render_table(results)
    assert "ratio 0.95" in table and "ratio 2" not in table and "ratio 0.8" not in table


def test_a_result_without_a_machine_or_with_a_bad_date_is_refused(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"bench": "b", "date": "2026-01-01", "command": "x"}) + "\n")
    with pytest.raises(ValueError, match="missing machine"):
        render.load_results(path)
    path.write_text(json.dumps(result(date="Jan 1")) + "\n")
    with pytest.raises(ValueError, match="not YYYY-MM-DD"):
        render.load_results(path)


def test_a_page_without_markers_is_refused():
    with pytest.raises(ValueError, match="markers"):
        render.render_page("# Benchmarks\n", [result(ratio=1.0)])
