"""Pipeline-run records: `<workdir>/pipeline_runs/<id>.json`, what `lmforge status` reads.

Each record lists, per stage, its cache key, state (cached/ran/failed/skipped/pending/running/
killed), artifact directory, MLflow run id and duration. Records are rewritten atomically.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.redaction import redact_text

STATES = ("pending", "running", "cached", "ran", "failed", "skipped", "killed")


@dataclass(slots=True)
class StageRecord:
    stage: str
    key: str
    state: str = "pending"
    artifact: str | None = None
    mlflow_run_id: str | None = None
    duration_s: float | None = None
    error: str | None = None
    warning: str | None = None
    holder: dict[str, Any] | None = None
    """While the stage runs or waits: the run holding its lease (run, host, pid, since)."""


@dataclass(slots=True)
class PipelineRecord:
    run_id: str
    command: str
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    state: str = "running"
    mlflow_run_id: str | None = None
    stages: list[StageRecord] = field(default_factory=list)

    def stage(self, name: str) -> StageRecord:
        for record in self.stages:
            if record.stage == name:
                return record
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """The record as saved: free text (the command, stage errors) with secrets masked."""
        data = asdict(self)
        data["command"] = redact_text(data["command"])
        for stage in data["stages"]:
            stage["error"] = redact_text(stage["error"]) if stage["error"] else stage["error"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineRecord:
        stages = [StageRecord(**s) for s in data.pop("stages", [])]
        return cls(**data, stages=stages)


class RecordBook:
    """Reads and writes the pipeline-run records of one workdir."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def save(self, record: PipelineRecord) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomic(self.root / f"{record.run_id}.json", json.dumps(record.to_dict(), indent=2))

    def load(self, run_id: str) -> PipelineRecord:
        path = self.root / f"{run_id}.json"
        if not path.is_file():
            raise FileNotFoundError(f"no pipeline run {run_id!r} in {self.root}")
        return PipelineRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def all(self) -> list[PipelineRecord]:
        records = []
        for path in self.root.glob("*.json"):
            records.append(PipelineRecord.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        return sorted(records, key=lambda r: r.started_at)

    def latest(self) -> PipelineRecord | None:
        records = self.all()
        return records[-1] if records else None

    def mark_interrupted(self) -> int:
        """Records left 'running' by a killed driver become 'killed'; returns how many."""
        fixed = 0
        for record in self.all():
            if record.state == "running":
                record.state = "killed"
                for stage in record.stages:
                    if stage.state in ("running", "pending"):
                        stage.state = "killed"
                self.save(record)
                fixed += 1
        return fixed
