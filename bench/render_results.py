"""Render the current benchmark table into docs/benchmarks.md from bench/results.jsonl (and the
rows of the pages that show one bench's figures: `PAGES`).

`bench/results.jsonl` keeps every run added to it, one JSON object a line: the bench's last JSON
line as it printed it, plus `"machine"`, `"date"` (YYYY-MM-DD) and `"command"` (and, where a figure
needs one, a short `"note"`). The current table shows, for each bench (and variant: `model`,
`mode`, `size`, `store`) and machine, the latest run of the shipped settings: runs with
`"overrides"` are experiments, kept in the file and left out of the table. Runs of one date are
ordered by their line in the file, the later one counting as the latest.

To add a run, append its JSON line with those keys, then render:

    .venv/bin/python bench/render_results.py          # rewrite the tables of `PAGES`
    .venv/bin/python bench/render_results.py --check  # exit 1 if a page is not what it renders
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results.jsonl"
PAGE = REPO / "docs" / "benchmarks.md"
BEGIN = "<!-- results:begin (rendered by bench/render_results.py from bench/results.jsonl) -->"
END = "<!-- results:end -->"
PAGES: dict[Path, tuple[str, ...] | None] = {
    PAGE: None,
    REPO / "docs" / "scaling.md": ("scaling_law",),
    REPO / "docs" / "sweeps.md": ("sweep",),
}
"""Each page with a table, and the benches its table shows (None: every bench)."""
REQUIRED = ("bench", "machine", "date", "command")
VARIANT_KEYS = ("model", "mode", "size", "store")
"""Keys that make two runs of one bench different measurements rather than two of the same."""

ORDER = (
    "train_throughput",
    "demo_quality",
    "greedy_loops",
    "minimal_pair_margins",
    "gpu_train",
    "checkpoint_scale",
    "clean_throughput",
    "dedup_throughput",
    "clean_scale",
    "clean_memory",
    "tokenize_throughput",
    "tokenizer_sample",
    "token_scale",
    "store_commit",
    "eval_scale",
    "generate_throughput",
    "estimate_accuracy",
    "scaling_law",
    "suite_time",
)
HEADLINE = {
    "train_throughput": (
        "lmforge",
        "reference",
        "ratio",
        "precision",
        "zero2_2workers",
        "compile_speedup",
    ),
    "demo_quality": (
        "all_met",
        "worst.val_to_bigram",
        "worst.minimal_pair_accuracy",
        "worst.greedy_max_word_4gram_count",
        "worst.greedy_max_top_word_share",
        "worst.top_p_word_distinct_2",
    ),
    "greedy_loops": ("greedy_loop_rate", "greedy_loop_prompts"),
    "gpu_train": ("ratio", "mfu", "eager_ratio", "zero2_ratio", "async_stall_share", "save_s"),
    "checkpoint_scale": (
        "save_rss_rise_mb",
        "save_s",
        "async_stall_share",
        "export_peak_rss_over_weights",
        "zero3_setup_rss_over_weights",
        "load_rss_rise_mb",
    ),
    "clean_throughput": (
        "lmforge",
        "reference",
        "ratio",
        "agreement",
        "scaling_2cpu",
        "mb_per_cpu_s",
        "paragraph_dedup_cpu_share",
    ),
    "dedup_throughput": ("ratio", "agreement"),
    "clean_scale": (
        "docs",
        "wall_s",
        "lmforge",
        "time_growth",
        "rss_growth",
        "coordinator_peak_rss_mb",
        "task_peak_rss_mb",
        "subset_identical",
    ),
    "clean_memory": ("lmforge", "reference", "ratio"),
    "tokenize_throughput": ("ratio", "scaling_2cpu"),
    "tokenizer_sample": ("peak_rss_mb", "wall_s", "bytes_per_token_rel_diff", "min_word_count"),
    "token_scale": ("ready_s", "open_files", "mappings", "rss_mb", "index_rss_mb_per_rank"),
    "store_commit": ("artifact_bytes", "commit_rchar_bytes", "commit_s", "rehash_s"),
    "eval_scale": (
        "tokens",
        "rel_diff",
        "scaling_2actors",
        "driver_peak_rss_mb",
        "actor_peak_rss_mb",
    ),
    "generate_throughput": ("lmforge", "reference", "ratio"),
    "estimate_accuracy": ("max_time_error", "max_memory_error", "all_within"),
    "scaling_law": (
        "runs",
        "alpha",
        "beta",
        "a",
        "a_interval",
        "b",
        "b_interval",
        "heldout_budget",
        "heldout_params",
        "n_star",
        "rel_error",
        "baseline_rel_error",
        "wall_s",
    ),
    "suite_time": (
        "lmforge",
        "reference",
        "ratio",
        "passed",
        "failed",
        "reference_passed",
        "cpu_s",
        "reference_cpu_s",
        "busy",
    ),
}


def load_results(path: Path = RESULTS) -> list[dict]:
    """Every result, in file order; a line without the required keys is an error."""
    results = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        result = json.loads(line)
        missing = [key for key in REQUIRED if key not in result]
        if missing:
            raise ValueError(f"{path}:{number}: missing {', '.join(missing)}; add them to the line")
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(result["date"])):
            raise ValueError(f"{path}:{number}: date {result['date']!r} is not YYYY-MM-DD")
        results.append(result)
    return results


def variant(result: dict) -> tuple:
    return tuple((key, str(result[key])) for key in VARIANT_KEYS if key in result)


def current(results: list[dict]) -> list[dict]:
    """The latest run of the shipped settings per bench, variant and machine, in table order."""
    latest: dict[tuple, tuple[str, int, dict]] = {}
    for position, result in enumerate(results):
        if "overrides" in result:
            continue
        key = (result["bench"], variant(result), result["machine"])
        if key not in latest or (result["date"], position) >= latest[key][:2]:
            latest[key] = (result["date"], position, result)

    def rank(key: tuple) -> tuple:
        bench, kind, machine = key
        place = ORDER.index(bench) if bench in ORDER else len(ORDER)
        return (place, bench, kind, machine)

    return [latest[key][2] for key in sorted(latest, key=rank)]


def _value(result: dict, dotted: str):
    value = result
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _format(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and abs(value) >= 1e7:  # FLOPs, parameters
        return f"{value:.3g}"
    if isinstance(value, float) and abs(value) >= 1000:
        return f"{value:,.0f}"
    if isinstance(value, int) and abs(value) >= 10000:
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def figures(result: dict) -> str:
    """The result's headline keys as `key value` pairs (every scalar key for an unknown bench)."""
    if result["bench"] == "minimal_pair_margins":  # counts per workdir scored
        return "; ".join(
            f"{workdir}: right {c['right']}, sure_right {c['sure_right']}, "
            f"sure_wrong {c['sure_wrong']}"
            for workdir, c in result.get("counts", {}).items()
        )
    keys = HEADLINE.get(result["bench"])
    if keys is None:
        skip = {"bench", "unit", "machine", "date", "command", "note"}
        keys = tuple(k for k, v in result.items() if k not in skip and not isinstance(v, dict))
    parts = []
    for key in keys:
        value = _value(result, key)
        if isinstance(value, list) and result["bench"] in HEADLINE:  # an interval, named
            parts.append(f"{key.split('.')[-1]} [{', '.join(_format(v) for v in value)}]")
        elif value is not None and not isinstance(value, (dict, list)):
            parts.append(f"{key.split('.')[-1]} {_format(value)}")
    return ", ".join(parts)


def render_table(results: list[dict], benches: tuple[str, ...] | None = None) -> str:
    rows = [
        "| bench | machine | date | figures |",
        "|---|---|---|---|",
    ]
    for result in current(results):
        if benches is not None and result["bench"] not in benches:
            continue
        kind = ", ".join(f"{k} {v}" for k, v in variant(result))
        bench = f"`{result['bench']}`" + (f" ({kind})" if kind else "")
        note = f" *({result['note']})*" if result.get("note") else ""
        cells = (bench, result["machine"], result["date"], figures(result) + note)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows)


def render_page(page: str, results: list[dict], benches: tuple[str, ...] | None = None) -> str:
    """`page` with the text between its markers replaced by the current table (of `benches`)."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the page has no {BEGIN!r} ... {END!r} markers: add them for the table")
    table = render_table(results, benches)
    return page[: start + len(BEGIN)] + "\n" + table + "\n" + page[end:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the page is out of date")
    args = parser.parse_args()
    results = load_results()
    for path, benches in PAGES.items():
        page = path.read_text(encoding="utf-8")
        rendered = render_page(page, results, benches)
        if args.check:
            if rendered != page:
                sys.exit(f"{path} is out of date: run `.venv/bin/python bench/render_results.py`")
            continue
        path.write_text(rendered, encoding="utf-8")


if __name__ == "__main__":
    main()
