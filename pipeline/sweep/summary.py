"""A sweep's comparison: one row per variant by its swept keys, sorted by the chosen metric.

Columns: the swept keys, the state, val perplexity and bits per byte (the `perplexity` stage),
training tokens/s, the variant's wall time, and how many of its stage runs it shares with other
variants (same cache key: run once, reused by the others). The page (`summary.md`) adds plots of
the metric against each swept key and the variants' loss curves overlaid;
`lmforge status --sweep` prints the table, `--json` the rows.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from lmforge.pipeline.sweep.records import SweepRecord, VariantRecord

METRICS = ("val_perplexity", "val_bits_per_byte", "tokens_per_s", "val_loss")
"""The figures kept per variant (`VariantRecord.metrics`), besides its wall time."""


def shared_stages(record: SweepRecord, variant: VariantRecord) -> int:
    """How many of the variant's stages have a cache key another variant has too."""
    others = Counter(
        (stage, key) for v in record.variants if v is not variant for stage, key in v.stages.items()
    )
    return sum(1 for item in variant.stages.items() if others[item])


def sorted_variants(record: SweepRecord) -> list[VariantRecord]:
    """Variants by the sweep's metric, lowest first; those without it last, in grid order."""

    def order(variant: VariantRecord) -> tuple[int, float, int]:
        value = variant.metrics.get(record.metric)
        ranked = isinstance(value, int | float) and math.isfinite(value)
        return (0 if ranked else 1, float(value) if ranked else 0.0, _index(variant))

    return sorted(record.variants, key=order)


def rows(record: SweepRecord) -> list[dict[str, Any]]:
    """`status --sweep --json`: one object per variant, sorted (`sorted_variants`)."""
    out = []
    for variant in sorted_variants(record):
        metrics = {name: variant.metrics.get(name) for name in METRICS}
        metrics["wall_s"] = None if variant.wall_s is None else round(variant.wall_s, 1)
        out.append(
            {
                "variant": variant.variant,
                "params": dict(variant.params),
                "state": variant.state,
                "metrics": metrics,
                "stages": dict(variant.stages),
                "shared_stages": shared_stages(record, variant),
                "stopped_at": variant.stopped_at,
                "pipeline_runs": list(variant.pipeline_runs),
                "error": variant.error,
            }
        )
    return out


def table(record: SweepRecord) -> str:
    """The comparison as aligned text (`lmforge status --sweep`)."""
    header = [
        *record.swept,
        "variant",
        "state",
        "val ppl",
        "bits/byte",
        "tokens/s",
        "wall",
        "shared",
    ]
    lines = [header]
    for row in rows(record):
        m = row["metrics"]
        state = row["state"] + (f"@{row['stopped_at']}" if row["stopped_at"] else "")
        lines.append(
            [
                *(row["params"].get(key, "-") for key in record.swept),
                row["variant"],
                state,
                _figure(m["val_perplexity"], "{:.5g}"),
                _figure(m["val_bits_per_byte"], "{:.3f}"),
                _figure(m["tokens_per_s"], "{:.0f}"),
                _figure(m["wall_s"], "{:.0f}s"),
                str(row["shared_stages"]),
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    ]
    title = f"sweep {record.sweep_id} ({len(record.variants)} variants): {record.state}"
    if record.mlflow_run_id:
        title += f"   MLflow run {record.mlflow_run_id}"
    errors = [f"{r['variant']}: {r['error']}" for r in rows(record) if r["error"]]
    return "\n".join(
        [title, f"sorted by {record.metric}", "", *text, *[""] * bool(errors), *errors]
    )


def write_page(record: SweepRecord, curves: dict[str, list[float]], directory: Path) -> Path:
    """`summary.md` (the table, links to the plots), `summary.json` (the rows) and the plots,
    in `directory`; returns the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(rows(record), indent=2), encoding="utf-8")
    plots = _plots(record, curves, directory)
    page = [
        f"# Sweep {record.sweep_id}",
        "",
        f"`{record.command}`",
        "",
        "```",
        table(record),
        "```",
        "",
    ]
    page += [f"![{name}]({name})" for name in plots]
    path = directory / "summary.md"
    path.write_text("\n".join(page) + "\n", encoding="utf-8")
    return path


def _plots(record: SweepRecord, curves: dict[str, list[float]], directory: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for key in record.swept:
        points = [
            (v.params[key], v.metrics[record.metric])
            for v in record.variants
            if isinstance(v.metrics.get(record.metric), int | float)
        ]
        if not points:
            continue
        fig, ax = plt.subplots(figsize=(5, 3.5))
        xs = [_number(x) for x, _ in points]
        if all(isinstance(x, float) for x in xs):
            ax.scatter(xs, [y for _, y in points])
            if min(xs) > 0 and max(xs) / min(xs) >= 10:
                ax.set_xscale("log")
        else:
            ax.scatter([str(x) for x, _ in points], [y for _, y in points])
        ax.set_xlabel(key)
        ax.set_ylabel(record.metric)
        fig.tight_layout()
        name = f"{record.metric}_vs_{key}.png"
        fig.savefig(directory / name, dpi=100)
        plt.close(fig)
        names.append(name)
    if curves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for variant in record.variants:
            losses = curves.get(variant.variant)
            if losses:
                label = ", ".join(f"{k}={v}" for k, v in variant.params.items())
                ax.plot(range(1, len(losses) + 1), losses, label=label, linewidth=1)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(directory / "loss_curves.png", dpi=100)
        plt.close(fig)
        names.append("loss_curves.png")
    return names


def _number(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _figure(value: Any, form: str) -> str:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return form.format(value)


def _index(variant: VariantRecord) -> int:
    digits = variant.variant.lstrip("v")
    return int(digits) if digits.isdigit() else 0
