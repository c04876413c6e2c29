"""`report`: a model card (markdown and self-contained HTML) from every stage's manifest."""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping


@dataclass(kw_only=True, slots=True)
class ReportConfig:
    title: str = "lmforge model card"
    "Heading of the model card."


def parse(sections: dict) -> ReportConfig:
    return from_mapping(ReportConfig, sections["eval.report"], "eval.report")


def _table(stats: dict, keys: list[str] | None = None) -> str:
    rows = ["| metric | value |", "|---|---|"]
    for key in keys or sorted(stats):
        value = stats.get(key)
        if isinstance(value, float):
            value = f"{value:.4g}"
        if value is not None and not isinstance(value, dict | list):
            rows.append(f"| {key} | {value} |")
    return "\n".join(rows)


def _loss_plot(pretrain_dir: Path, out: Path) -> Path | None:
    summary_path = pretrain_dir / "training_summary.json"
    if not summary_path.is_file():
        return None
    losses = json.loads(summary_path.read_text()).get("losses") or []
    if not losses:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps = [p[0] if isinstance(p, list | tuple) else i + 1 for i, p in enumerate(losses)]
    values = [p[1] if isinstance(p, list | tuple) else p for p in losses]
    ax.plot(steps, values)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/token)")
    ax.set_title("Loss curve")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def _sample_line(record: dict) -> str:
    return f"- *{record['mode']}* **{record['prompt']}**{record['completion']}"


@stage(
    name="report",
    inputs=("clean", "train_tokenizer", "pretrain", "perplexity", "sample", "harm"),
    config=("eval.report",),
    parse_config=parse,
    version="1",
    num_cpus=0.5,
)
def report(ctx: StageContext) -> dict:
    cfg: ReportConfig = ctx.config
    m = {name: manifest["summary"] for name, manifest in ctx.input_manifests.items()}
    model_cfg = ctx.input_manifests["pretrain"]["config"]
    samples = (ctx.input("sample") / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    plot = _loss_plot(ctx.input("pretrain"), ctx.out_dir / "loss_curve.png")
    sections = [
        f"# {cfg.title}",
        "## Data\n" + _table(m["clean"]),
        "## Tokenizer\n" + _table(m["train_tokenizer"]),
        "## Model and training\n```json\n"
        + json.dumps(model_cfg, indent=2)
        + "\n```\n"
        + _table(m["pretrain"]),
        "![loss curve](loss_curve.png)" if plot else "",
        "## Perplexity\n" + _table(m["perplexity"]),
        "## Samples\n" + "\n".join(_sample_line(json.loads(s)) for s in samples),
        "## Harm probes\n" + _table(m["harm"]),
        "## Limitations\nThe toxicity scorer is a lexical classifier (alt-profanity-check): it "
        "misses implicit toxicity and over-flags reclaimed or quoted words. Small prompt sets give "
        "wide confidence intervals; treat the figures as a screen, not a certification.",
    ]
    markdown = "\n\n".join(s for s in sections if s)
    (ctx.out_dir / "model_card.md").write_text(markdown, encoding="utf-8")
    image = ""
    if plot:
        encoded = base64.b64encode(plot.read_bytes()).decode()
        image = f'<img alt="loss curve" src="data:image/png;base64,{encoded}">'
    body = html.escape(markdown).replace("![loss curve](loss_curve.png)", image)
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(cfg.title)}"
        f"</title></head><body><pre style='white-space:pre-wrap'>{body}</pre></body></html>"
    )
    (ctx.out_dir / "model_card.html").write_text(page, encoding="utf-8")
    ctx.tracker.log_artifact(ctx.out_dir / "model_card.md")
    ctx.tracker.log_artifact(ctx.out_dir / "model_card.html")
    return {"model_card": "model_card.md", "val_perplexity": m["perplexity"].get("val_perplexity")}
