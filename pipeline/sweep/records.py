"""Sweep records: `<workdir>/sweeps/<id>.json`, beside the pipeline-run records.

A sweep's record lists its swept keys and, per variant, its params, its state (pending,
running, finished, stopped, failed), the pipeline runs it took (a stopped variant takes two: the
run that was stopped, and the one that commits its model under `train.stopped_at`), the step it
stopped at, its figures and its stages' cache keys. `lmforge status --sweep` reads it; a rerun of
the same sweep reads it to finish only what is unfinished. Records are rewritten atomically.
A record left `running` by a driver of this host that is gone reads as `killed`, its running
variants too (`engine.driver.alive_here`, as pipeline-run records are judged).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.engine.driver import alive_here

VARIANT_STATES = ("pending", "running", "finished", "stopped", "failed", "killed")
DONE_STATES = ("finished", "stopped")


@dataclass(slots=True)
class VariantRecord:
    variant: str
    params: dict[str, str]
    overrides: list[str] = field(default_factory=list)
    """The variant's own overrides (its swept keys)."""
    state: str = "pending"
    pipeline_runs: list[str] = field(default_factory=list)
    started_at: float | None = None
    finished_at: float | None = None
    stopped_at: int | None = None
    """The step an early-stopped variant stopped at."""
    stop_requested_at: int | None = None
    """The step whose val_loss ASHA stopped the variant on."""
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, str] = field(default_factory=dict)
    """Stage name -> cache key of the variant's last pipeline run."""
    stage_states: dict[str, str] = field(default_factory=dict)
    """Stage name -> state (ran, cached, ...) in the variant's last pipeline run."""

    @property
    def wall_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


@dataclass(slots=True)
class SweepRecord:
    sweep_id: str
    command: str
    swept: list[str]
    """The swept keys, in the order given."""
    shared: list[str] = field(default_factory=list)
    """The overrides every variant shares."""
    early_stop: dict[str, Any] | None = None
    """ASHA's settings when the sweep stops variants early."""
    metric: str = "val_perplexity"
    """The metric the summary is sorted by (lower is better)."""
    state: str = "running"
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    mlflow_run_id: str | None = None
    variants: list[VariantRecord] = field(default_factory=list)
    until: str | None = None
    """The stage each variant stops after (None: the whole pipeline)."""
    scaling: dict[str, Any] | None = None
    """Set when the sweep is a scaling grid (`lmforge scaling run`): each variant's budget, N and
    D, what `scaling fit --sweep` reads (`pipeline/scaling/grid_sweep.py`)."""
    driver: dict[str, Any] | None = None
    """The process running the sweep (`engine.driver.this_driver`)."""

    def variant(self, name: str) -> VariantRecord:
        for record in self.variants:
            if record.variant == name:
                return record
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepRecord:
        variants = [VariantRecord(**v) for v in data.pop("variants", [])]
        return cls(**data, variants=variants)._judged()

    def _judged(self) -> SweepRecord:
        """This record, `killed` (with its running variants) if it says `running` and its
        driver ran on this host and is gone."""
        if self.state == "running" and alive_here(self.driver) is False:
            self.state = "killed"
            for variant in self.variants:
                if variant.state == "running":
                    variant.state = "killed"
        return self


class SweepBook:
    """Reads and writes the sweep records of one workdir (safely from several threads)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()

    def save(self, record: SweepRecord) -> None:
        with self._lock:
            self.root.mkdir(parents=True, exist_ok=True)
            text = json.dumps(record.to_dict(), indent=2, default=str)
            write_atomic(self.root / f"{record.sweep_id}.json", text)

    def find(self, sweep_id: str) -> SweepRecord | None:
        path = self.root / f"{sweep_id}.json"
        if not path.is_file():
            return None
        return SweepRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def all(self) -> list[SweepRecord]:
        """Every sweep, in the order they started."""
        records = [
            SweepRecord.from_dict(json.loads(p.read_text(encoding="utf-8")))
            for p in self.root.glob("sweep-*.json")
        ]
        return sorted(records, key=lambda r: (r.started_at, r.sweep_id))

    def latest(self) -> SweepRecord | None:
        records = self.all()
        return records[-1] if records else None
