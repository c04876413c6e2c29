"""The sweep driver's look, every second, at its variants' validation losses, for ASHA.

Its verdict on each step goes to the variant's watch file (`training.early_stop`), where the
training loop waits for it.

A variant whose pretraining runs has its `val_loss` read from its pretrain stage's MLflow run as
training logs it; one whose model is a cache hit counts too, with the figures of the run that
trained it (read once), so a rerun's cached variants still set the rungs' bars; and so does,
once its pretraining is done, a variant trained here: it may finish between two looks (a short
run, or one variant at a time), leaving its last figures unread. A variant ASHA
stops gets a stop request (`training.early_stop`) and its record says at which step.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from lmforge.pipeline.engine.run_records import PipelineRecord
from lmforge.pipeline.engine.tracking import client
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.sweep.early_stop import EarlyStopper
from lmforge.pipeline.sweep.records import SweepRecord
from lmforge.pipeline.sweep.variant_figures import open_config_store
from lmforge.pipeline.training.early_stop.requests import request_stop, stop_request_file

log = logging.getLogger("lmforge")


class AshaWatch:
    def __init__(
        self, stopper: EarlyStopper, tracking_uri: str, config: dict[str, Any], workdir: Path
    ) -> None:
        self.stopper = stopper
        self.mlflow = client(tracking_uri)
        self.store = open_config_store(config, workdir)
        self.store_location = str(config["cluster"].get("store_uri") or workdir / "store")
        self.fed: set[str] = set()
        """Variants whose figures ASHA has whole (a cached model's)."""

    def look(self, record: SweepRecord, live: dict[str, PipelineRecord]) -> list[str]:
        """Hand new figures to ASHA; returns the variants it stopped now (their records
        updated, to be saved by the caller)."""
        stopped = []
        for variant in record.variants:
            name = variant.variant
            if name in self.fed or variant.stop_requested_at is not None:
                continue
            pipeline = live.get(name)
            if pipeline is not None:
                try:
                    stage = pipeline.stage("pretrain")
                except KeyError:
                    continue
                state, key, run_id = stage.state, stage.key, stage.mlflow_run_id
            else:
                state = variant.stage_states.get("pretrain", "")
                key, run_id = variant.stages.get("pretrain", ""), None
            if state == "cached":
                self._feed_trained(name, key, "its cached model's")
            elif state == "ran":  # trained here: the figures logged after the last look too
                self._feed_trained(name, key, "its model's")
            elif state == "running" and run_id:
                path = stop_request_file(self.store_location, key) or ""
                step, answered = self._feed_running(name, run_id)
                watch = {"sweep": record.sweep_id, "variant": name, "answered": answered}
                if step is not None:
                    request_stop(path, {**watch, "stop": True, "step": step})
                    variant.stop_requested_at = step
                    stopped.append(name)
                elif answered:
                    request_stop(path, watch)
        return stopped

    def _feed_trained(self, name: str, key: str, whose: str) -> None:
        """Every figure of a committed model, once (those ASHA had already count once)."""
        history = self._trained_history(key)
        for step, value in history:
            self.stopper.report(name, step, value)
        self.fed.add(name)
        log.info("[%s] ASHA counts %s %d val_loss figures", name, whose, len(history))

    def _trained_history(self, key: str) -> list[tuple[int, float]]:
        """The val_loss figures of a committed model: from its training summary (the whole
        lineage's, however many runs it took), else from the MLflow run that produced it."""
        try:
            directory = self.store.materialize("pretrain", key)
            summary = json.loads((directory / "training_summary.json").read_text("utf-8"))
            if summary.get("val_losses"):
                return sorted((int(step), float(value)) for step, value in summary["val_losses"])
            source = (self.store.manifest("pretrain", key) or {}).get("mlflow_run_id")
        except (LmforgeError, OSError, ValueError):
            return []
        return self._history(source) if source else []

    def _feed_running(self, name: str, run_id: str) -> tuple[int | None, int]:
        """(the step at which ASHA stops the variant, if it does; the last step it judged)."""
        answered = 0
        for step, value in self._history(run_id):
            if self.stopper.report(name, step, value):
                log.info("[%s] ASHA stops it at step %d (val_loss %.4f)", name, step, value)
                return step, step
            answered = step
        return None, answered

    def _history(self, run_id: str) -> list[tuple[int, float]]:
        try:
            history = self.mlflow.get_metric_history(run_id, "val_loss")
        except Exception:  # a busy store: the next look gets it
            return []
        return sorted((m.step, m.value) for m in history)
