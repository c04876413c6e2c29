"""A variant's figures for the comparison, read from its stages' manifests in the store."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from lmforge.pipeline.engine.run_records import PipelineRecord
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.storage.artifact_store import open_store
from lmforge.pipeline.storage.settings import StoreSettings
from lmforge.pipeline.sweep.records import SweepRecord

log = logging.getLogger("lmforge")


def open_config_store(config: dict[str, Any], workdir: Path):
    """The artifact store a variant's config names."""
    settings = StoreSettings.from_cluster(config["cluster"], workdir)
    return open_store(config["cluster"].get("store_uri"), workdir, settings)


def collect_figures(config: dict[str, Any], workdir: Path, pipeline: PipelineRecord) -> dict:
    """val perplexity, bits per byte and val loss (`perplexity`), tokens/s (`pretrain`)."""
    store = open_config_store(config, workdir)
    keys = {s.stage: s.key for s in pipeline.stages if s.state in ("ran", "cached")}
    figures: dict[str, Any] = {}
    try:
        scored = (store.manifest("perplexity", keys["perplexity"]) or {}).get("summary", {})
        figures["val_perplexity"] = scored.get("val_perplexity")
        figures["val_bits_per_byte"] = scored.get("val_bits_per_byte")
        figures["val_loss"] = scored.get("val_loss")
    except (KeyError, LmforgeError, OSError):
        pass
    try:
        trained = (store.manifest("pretrain", keys["pretrain"]) or {}).get("summary", {})
        figures["tokens_per_s"] = trained.get("tokens_per_s")
        figures["final_loss"] = trained.get("final_loss")
    except (KeyError, LmforgeError, OSError):
        pass
    return figures


def loss_curves(config: dict[str, Any], workdir: Path, record: SweepRecord) -> dict[str, list]:
    """Each variant's training losses, step by step (`training_summary.json` of its model)."""
    store = open_config_store(config, workdir)
    curves = {}
    for variant in record.variants:
        key = variant.stages.get("pretrain")
        if not key or variant.state not in ("finished", "stopped"):
            continue
        try:
            path = store.materialize("pretrain", key) / "training_summary.json"
            curves[variant.variant] = json.loads(path.read_text(encoding="utf-8")).get("losses", [])
        except (LmforgeError, OSError, ValueError) as exc:
            log.warning("no loss curve for %s: %s", variant.variant, exc)
    return curves
