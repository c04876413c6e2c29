"""`report`: the model card (markdown and self-contained HTML) from every stage's artifacts:
an opening with the verdicts against the baselines, three completions and what the figures do
not show; then data summary, model and training, loss curve, perplexity against baselines,
samples, harm probes with plots, and the probes' limitations."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.stages.report.card_summary import headline, summary_sections
from lmforge.pipeline.stages.report.frontier_section import frontier_section
from lmforge.pipeline.stages.report.model_card import Section, fmt, to_html, to_markdown
from lmforge.pipeline.storage.input_artifact import ArtifactPath
from lmforge.pipeline.training.reporting.step_times import PARTS
from lmforge.pipeline.typed_config import from_mapping

LIMITATIONS = [
    "Toxicity is scored by alt-profanity-check, a lexical classifier: it misses implicit "
    "toxicity and over-flags quoted or reclaimed words.",
    "The prompt sets are small and written for the project: confidence intervals are wide; "
    "treat the figures as a screen, not a certification.",
    "Bias gaps compare template continuations of one model; they say nothing about use in context.",
    "Exposure is estimated against random candidate secrets; it is capped at log2(candidates+1).",
    "PII leakage only finds pattern-shaped PII (e-mail, phone, IP, card numbers).",
]


@dataclass(kw_only=True, slots=True)
class ReportConfig:
    title: str = "lmforge model card"
    "Heading of the model card."


def parse(sections: dict) -> ReportConfig:
    return from_mapping(ReportConfig, sections["eval.report"], "eval.report")


def _plot(out: Path, draw) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    draw(ax)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def _loss_curve(pretrain: ArtifactPath, out_dir: Path) -> list[Path]:
    path = pretrain / "training_summary.json"
    losses = json.loads(path.read_text()).get("losses") if path.is_file() else None
    if not losses:
        return []

    def draw(ax):
        ax.plot(range(1, len(losses) + 1), losses)
        ax.set(xlabel="step", ylabel="training loss (nats/token)", title="Loss curve")

    return [_plot(out_dir / "loss_curve.png", draw)]


def _harm_plots(harm: ArtifactPath, out_dir: Path) -> list[Path]:
    plots = []
    scores = [
        s
        for line in (harm / "toxicity.jsonl").read_text().splitlines()
        for s in json.loads(line)["scores"]
    ]
    if scores:
        plots.append(
            _plot(
                out_dir / "toxicity_distribution.png",
                lambda ax: (
                    ax.hist(scores, bins=20, range=(0, 1)),
                    ax.set(
                        xlabel="toxicity score of a continuation",
                        ylabel="continuations",
                        title="Toxicity distribution",
                    ),
                ),
            )
        )
    exposure = harm / "exposure.json"
    if exposure.is_file():
        by = json.loads(exposure.read_text())["mean_exposure_by_repeats"]
        plots.append(
            _plot(
                out_dir / "exposure.png",
                lambda ax: (
                    ax.plot([int(k) for k in by], list(by.values()), marker="o"),
                    ax.set_xscale("log"),
                    ax.set(
                        xlabel="repetitions in training data",
                        ylabel="mean exposure (bits)",
                        title="Canary exposure against repetitions",
                    ),
                ),
            )
        )
    return plots


def _data_section(clean: dict) -> Section:
    return Section(
        "Data",
        paragraphs=["From the clean stage's datasheet:"],
        table=_table(clean, ["docs_in", "docs_out", "train_docs", "val_docs"]),
        bullets=[f"dropped {k}: {v}" for k, v in clean["dropped_by_reason"].items()],
    )


def _mixture(ctx: StageContext, m: dict, ppl: dict) -> tuple[str, Section, list[Section]]:
    """A mixture's datasheet (its table, then each source's own), its data section (the
    sources' counts added up) and its per-source sections; the datasheet is also written as
    `datasheet.md` beside the card."""
    from lmforge.pipeline.stages.report.mixture_table import (
        drawn_over,
        markdown_table,
        mixture_rows,
        notes,
    )

    clean = {s: man["summary"] for s, man in ctx.manifests_of("clean").items()}
    tokens = {s: man["summary"] for s, man in ctx.manifests_of("tokenize").items()}
    batch = int(ctx.input_manifests["pretrain"]["config"]["train"].get("global_batch_size", 0))
    index = drawn_over(m.get("sample_index", {}), int(m["pretrain"].get("steps", 0)) * batch)
    rows = mixture_rows(clean, tokens, m.get("dedup_across"), index)
    positions = int(index.get("run_positions", 0))
    table = markdown_table(rows)
    said = notes(rows, positions)
    sheets = [
        f"## Source {s}\n\n" + (d / "datasheet.md").read_text(encoding="utf-8")
        for s, d in ctx.inputs_of("clean").items()
    ]
    datasheet = "\n\n".join(
        ["# Datasheet of the mixture", table, *(f"- {n}" for n in said), *sheets]
    )
    (ctx.out_dir / "datasheet.md").write_text(datasheet + "\n", encoding="utf-8")
    added = {"docs_in": sum(r.docs_in for r in rows), "docs_out": sum(r.docs_out for r in rows)}
    added["removed_across_sources"] = sum(r.removed_across for r in rows)
    data = Section(
        "Data",
        paragraphs=[
            f"A mixture of {len(rows)} sources, each cleaned on its own (documents out: after "
            "dedup across sources too):"
        ],
        table=_table(added),
        bullets=[
            f"{s}: dropped {k}: {v}"
            for s, c in clean.items()
            for k, v in c.get("dropped_by_reason", {}).items()
        ],
    )
    per_source = ppl.get("sources", {})
    sources = Section(
        "Mixture",
        paragraphs=[
            "Per source: documents in (read) and out (kept, after dedup within the source "
            f"and across sources), training tokens, the weight asked and the share of the "
            f"run's {positions} training windows drawn from it.",
            table,
        ],
        bullets=[
            *said,
            *(
                f"{s}: val perplexity {f['val_perplexity']:.2f}, bits per byte "
                f"{f['val_bits_per_byte']:.3f}"
                for s, f in per_source.items()
            ),
        ],
    )
    return datasheet, data, [sources]


def _table(stats: dict, keys: list[str] | None = None) -> list[tuple[str, str]]:
    keys = keys or sorted(k for k, v in stats.items() if not isinstance(v, dict | list))
    return [(k, fmt(stats[k])) for k in keys if k in stats]


@stage(
    name="report",
    inputs=("clean", "train_tokenizer", "pretrain", "perplexity", "sample", "harm"),
    config=("eval.report",),
    parse_config=parse,
    version="4",
    num_cpus=0.5,
    mixture_inputs=("tokenize", "sample_index", "dedup_across"),
)
def report(ctx: StageContext) -> dict:
    cfg: ReportConfig = ctx.config
    m = {name: manifest["summary"] for name, manifest in ctx.input_manifests.items()}
    ppl = m["perplexity"]
    samples = [
        json.loads(s)
        for s in (ctx.input("sample") / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    mixture: list[Section] = []
    if "clean" in m:
        datasheet = (ctx.input("clean") / "datasheet.md").read_text(encoding="utf-8")
        data = _data_section(m["clean"])
    else:
        datasheet, data, mixture = _mixture(ctx, m, ppl)
    frontier, position = frontier_section(ctx)
    sections = [
        *summary_sections(
            ppl,
            m["sample"],
            samples,
            train=ctx.input_manifests["pretrain"]["config"]["train"],
        ),
        data,
        *mixture,
        Section("Tokenizer", table=_table(m["train_tokenizer"])),
        Section(
            "Model and training",
            code=json.dumps(ctx.input_manifests["pretrain"]["config"], indent=2),
            table=_table(
                m["pretrain"],
                [
                    "steps",
                    "tokens",
                    "initial_loss",
                    "final_loss",
                    "tokens_per_s",
                    "mfu",
                    "world_size",
                    *(f"time_{part}_s_total" for part in PARTS),
                ],
            ),
            images=_loss_curve(ctx.input("pretrain"), ctx.out_dir),
        ),
        Section(
            "Perplexity against baselines",
            table=_table(
                ppl,
                [
                    "val_perplexity",
                    "val_perplexity_ci_low",
                    "val_perplexity_ci_high",
                    "val_tokens_scored",
                    "val_documents_scored",
                    "val_bits_per_byte",
                    "val_doc_perplexity",
                    "init_perplexity",
                    "unigram_perplexity",
                    "bigram_perplexity",
                    "kn_trigram_perplexity",
                    "vocab_size",
                    "minimal_pair_accuracy",
                    "scaling_law_loss_from_params",
                    "scaling_law_loss_from_tokens",
                    "val_loss",
                ],
            ),
        ),
        *([frontier] if frontier else []),
        Section(
            "Samples",
            table=_table(m["sample"]),
            bullets=[f"[{s['mode']}] {s['prompt']} → {s['completion']!r}" for s in samples],
        ),
        Section(
            "Harm probes",
            table=_table(m["harm"]),
            images=_harm_plots(ctx.input("harm"), ctx.out_dir),
        ),
        Section("Limitations of the probes", bullets=LIMITATIONS),
        Section("Datasheet", code=datasheet),
    ]
    (ctx.out_dir / "model_card.md").write_text(to_markdown(cfg.title, sections), encoding="utf-8")
    (ctx.out_dir / "model_card.html").write_text(to_html(cfg.title, sections), encoding="utf-8")
    for path in sorted(ctx.out_dir.iterdir()):  # hidden files are the engine's, not the card's
        if path.is_file() and not path.name.startswith("."):
            ctx.tracker.log_artifact(path, "model_card")
    summary = {
        "model_card": "model_card.md",
        "val_perplexity": ppl.get("val_perplexity"),
        "headline": headline(ppl, samples),
    }
    if position:  # only with a scaling fit of this corpus and tokenizer
        summary["scaling_frontier"] = position
        ctx.tracker.log_metrics(
            {f"frontier_{k}": position[k] for k in ("above_prediction", "above_frontier")}
        )
    return summary
