"""The model card's place of the model against a scaling fit of its own corpus and tokenizer
(`pipeline/scaling/frontier_position.py`), when the workdir holds one.

The fit is a record of the workdir (`<workdir>/scaling/<id>/fit.json`), not an input artifact:
it is read as the card is written and is no part of the report's cache key, so a card written
before the fit was made does not show it until `lmforge rerun report`.
"""

from __future__ import annotations

import logging

from lmforge.pipeline.engine.stage import StageContext
from lmforge.pipeline.stages.report.model_card import Section

log = logging.getLogger("lmforge")


def frontier_section(ctx: StageContext) -> tuple[Section | None, dict]:
    """(the card's section, the figures for the summary), or (None, {}) without a fit."""
    from lmforge.pipeline.scaling.frontier_position import (
        fit_for_corpus,
        frontier_position,
        position_lines,
    )
    from lmforge.pipeline.scaling.shapes import model_config

    clean = [m["key"] for m in ctx.manifests_of("clean").values()]
    tokenizer = [ctx.input_manifests["train_tokenizer"]["key"]]
    fit = fit_for_corpus(ctx.workdir, clean, tokenizer)
    if fit is None:
        return None, {}
    ppl = ctx.input_manifests["perplexity"]["summary"]
    pretrain = ctx.input_manifests["pretrain"]
    tokens = pretrain["summary"].get("tokens")
    if not tokens or "val_loss" not in ppl or "vocab_size" not in ppl:
        log.warning("report: the model's tokens or val_loss are unknown: no frontier section")
        return None, {}
    cfg = model_config(pretrain["config"]["model"], ppl["vocab_size"])
    try:
        position = frontier_position(fit, cfg, float(tokens), float(ppl["val_loss"]))
    except (KeyError, TypeError, ValueError) as exc:  # a damaged fit must not fail the card
        log.warning("report: scaling fit %s unreadable (%s): no frontier section", fit["path"], exc)
        return None, {}
    law = fit["law"]
    section = Section(
        "Against the scaling frontier",
        paragraphs=[
            f"Scaling fit `{position.fit}` of this corpus and tokenizer: L(N, D) = "
            f"{law['E']:.3g} + {law['A']:.3g} / N^{law['alpha']:.3f} + {law['B']:.3g} / "
            f"D^{law['beta']:.3f}, over {len(fit.get('runs', []))} runs (docs/scaling.md).",
        ],
        bullets=position_lines(position, ppl.get("val_tokens_scored")),
    )
    return section, position.to_json()
