"""A mixture's rows in the model card and its datasheet: per source, documents in and out,
tokens, the weight asked and the share of training tokens actually drawn (and why, where the
share drawn is more than a percentage point off)."""

from __future__ import annotations

from dataclasses import dataclass

TOLERANCE = 0.01
"""How far the share drawn may be from the weight asked before the card says why."""


@dataclass(frozen=True, slots=True)
class SourceRow:
    source: str
    docs_in: int
    docs_out: int
    removed_across: int
    train_tokens: int
    weight: float
    share_asked: float
    share_drawn: float
    epochs: float


def mixture_rows(
    clean: dict[str, dict], tokenize: dict[str, dict], dedup: dict | None, index: dict
) -> list[SourceRow]:
    """One row per source, from the summaries of its `clean` and `tokenize`, `dedup_across`
    (None when off) and `sample_index`."""
    across = (dedup or {}).get("sources", {})
    drawn = {part["source"]: part for part in index.get("mixture", [])}
    rows = []
    for source, summary in clean.items():
        removed = int(across.get(source, {}).get("removed", 0))
        part = drawn.get(source, {})
        rows.append(
            SourceRow(
                source=source,
                docs_in=int(summary.get("docs_in", 0)),
                docs_out=int(summary.get("docs_out", 0)) - removed,
                removed_across=removed,
                train_tokens=int(tokenize.get(source, {}).get("train_tokens", 0)),
                weight=float(part.get("weight", 0.0)),
                share_asked=float(part.get("share_asked", 0.0)),
                share_drawn=float(part.get("share_drawn", 0.0)),
                epochs=float(part.get("epochs", 0.0)),
            )
        )
    return rows


def drawn_over(index: dict, positions: int) -> dict:
    """`sample_index`'s summary with each source's draws and share over the first `positions`
    positions, those the run trained on (an index is reused by a run of fewer steps than the
    one that built it); the order's schedule decides them, so they are exact."""
    from lmforge.pipeline.training.data.mixture import drawn_counts

    parts = index.get("mixture", [])
    if not parts or positions <= 0 or positions == index.get("run_positions"):
        return index
    counts = drawn_counts([p["weight"] for p in parts], positions)
    parts = [
        {**p, "draws": int(n), "share_drawn": int(n) / positions, "epochs": int(n) / p["windows"]}
        for p, n in zip(parts, counts, strict=True)
    ]
    return {**index, "mixture": parts, "run_positions": positions}


def why_off(row: SourceRow, positions: int) -> str | None:
    """Why a source's share drawn is more than `TOLERANCE` from its weight, or None."""
    if abs(row.share_drawn - row.share_asked) <= TOLERANCE:
        return None
    return (
        f"{row.source}: drawn {row.share_drawn:.3f} for {row.share_asked:.3f} asked because the "
        f"run reads only {positions} windows, and a share moves in steps of 1/{positions}; "
        "more steps bring it within a point"
    )


def markdown_table(rows: list[SourceRow]) -> str:
    """The rows as a markdown table (the datasheet's and the card's)."""
    head = (
        "| source | docs in | docs out | removed across sources | train tokens | weight | "
        "share asked | share drawn | epochs |\n|---|---|---|---|---|---|---|---|---|"
    )
    lines = [
        f"| {r.source} | {r.docs_in} | {r.docs_out} | {r.removed_across} | {r.train_tokens} | "
        f"{r.weight:g} | {r.share_asked:.3f} | {r.share_drawn:.3f} | {r.epochs:.2f} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


def notes(rows: list[SourceRow], positions: int) -> list[str]:
    """What the table's reader should know: shares off their weight, sources repeated."""
    out = [why for row in rows if (why := why_off(row, positions))]
    out += [
        f"{r.source} is repeated: {r.epochs:.2f} epochs of its training windows, as its weight "
        "asks for more than it holds"
        for r in rows
        if r.epochs > 1
    ]
    return out
