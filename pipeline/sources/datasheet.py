"""What `clean` leaves for people: the datasheet, the excluded documents and the duplicates."""

from __future__ import annotations

from pathlib import Path

from lmforge.pipeline.sources.data_config import DataConfig

RISKS = (
    "Web and documentation text over-represents English and US/European authors "
    "(Bender et al. 2021; SLP3 10.10).",
    "The toxicity filter is a lexical classifier: implicit toxicity passes, quoted or reclaimed "
    "words are over-removed.",
    "PII redaction is pattern-based (e-mail, phone, IP, Luhn-valid card numbers): names and "
    "street addresses are not redacted.",
    "Copyright status of the sources is not checked.",
)


def _sources(cfg: DataConfig) -> str:
    if not cfg.paths:
        return "- the embedded default corpus: `pydoc_data.topics` and standard-library docstrings"
    return "\n".join(f"- `{p}`" for p in cfg.paths)


def _paragraph_lines(cfg: DataConfig, summary: dict) -> list[str]:
    """What paragraph dedup took out: units, characters and documents touched."""
    p, found = cfg.dedup.paragraph, summary.get("paragraph_dedup")
    if not p.enabled or found is None:
        return ["- repeated lines and paragraphs: not removed (data.dedup.paragraph.enabled=false)"]
    return [
        f"- repeated {p.unit}s removed: {found['units_removed']} copies, "
        f"{found['chars_removed']} characters, from {found['docs_touched']} documents "
        f"({p.unit}s normalised as CCNet does, found in >= {p.min_docs} documents, kept only in "
        f"the one with the smallest id; shorter than {p.min_chars} characters never counted)",
        f"- documents left too short by it and dropped: {found['docs_dropped']} "
        "(`lmforge inspect clean --filter paragraph_dedup` lists the most repeated)",
    ]


def write_datasheet(path: Path, cfg: DataConfig, summary: dict) -> None:
    """A datasheet (after Gebru et al.): sources, sizes, filters and removal rates, risks."""
    docs_in = max(summary["docs_in"], 1)
    lines = [
        "# Datasheet",
        "## Sources",
        _sources(cfg),
        "## Sizes",
        f"- documents read: {summary['docs_in']}",
        f"- documents kept: {summary['docs_out']} (train {summary['train_docs']}, "
        f"val {summary['val_docs']}); split by hash of the id, val share {cfg.val_fraction}",
        f"- files skipped: {summary['files_skipped']} (the documents read before a file broke "
        f"part-way are kept: {summary.get('docs_before_file_errors', 0)})",
        f"- canary documents planted: {summary['canary_docs']}",
        f"- read by {summary.get('read_units', 1)} tasks (units of about "
        f"{cfg.read_split_mb:g} MB on disk: data.read_split_mb)",
        "## Filters (in chain order)",
        "| step | docs in | docs out | removed | removal rate | CPU seconds |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in summary["filters"].items():
        removed = c["docs_in"] - c["docs_out"]
        rate = removed / c["docs_in"] if c["docs_in"] else 0.0
        cpu = c.get("cpu_seconds", 0.0)
        lines.append(
            f"| {name} | {c['docs_in']} | {c['docs_out']} | {removed} | {rate:.1%} | {cpu:.1f} |"
        )
    lines += ["## Removal by reason", "| reason | documents | share of input |", "|---|---|---|"]
    for reason, n in sorted(summary["dropped_by_reason"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {reason} | {n} | {n / docs_in:.1%} |")
    pii = summary["filters"].get("pii", {}).get("events", {})
    lines += [
        "## Deduplication",
        f"- exact duplicates removed: {summary['dropped_by_reason'].get('exact_duplicate', 0)}",
        f"- near duplicates removed: {summary['dropped_by_reason'].get('near_duplicate', 0)} "
        f"(MinHash, {cfg.dedup.near.bands} bands x {cfg.dedup.near.rows} rows, "
        f"{cfg.dedup.near.shingle_words}-word shingles, Jaccard >= {cfg.dedup.near.threshold})",
        *_paragraph_lines(cfg, summary),
        f"- dedup memory: the largest dedup task peaked at {summary['dedup_peak_rss_mb']:g} MB, "
        f"{summary['dedup_index_bytes_per_doc']} bytes per document deduplicated (its whole "
        "process, interpreter included; no process holds state for every document, so this "
        "falls as the corpus grows)",
        "## PII redactions",
        *(f"- {kind}: {n}" for kind, n in sorted(pii.items()) if kind != "documents_changed"),
        "## Languages",
        f"- kept: {', '.join(cfg.filters.language.languages)} "
        f"(confidence >= {cfg.filters.language.min_confidence})"
        if cfg.filters.language.enabled
        else "- language identification switched off",
        "## Known risks",
        *(f"- {r}" for r in RISKS),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
