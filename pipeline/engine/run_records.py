"""Pipeline-run records: `<workdir>/pipeline_runs/<id>.json`, what `lmforge status` reads.

Each record lists, per stage, its cache key, state (cached/ran/failed/skipped/pending/running/
killed), artifact directory, MLflow run id and duration, and names the run's driver (host, boot,
pid, start time) and its place in the order runs started in this workdir (`sequence`, given under
a lock, so "latest" means the run that started last whatever the clocks of the hosts sharing the
workdir say). Records are rewritten atomically.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.redaction import redact_text
from lmforge.pipeline.storage.temporaries import owner_alive

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
    driver: dict[str, Any] | None = None
    """The driver's owner record (`driver.this_driver`); None in records of lmforge 0.2.0."""
    sequence: int | None = None
    """1 + the highest sequence in the workdir when the run started; None before 0.3.0."""

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

    def start(self, record: PipelineRecord) -> None:
        """Save a starting run's first record, after every run that started before it."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".sequence.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if this process dies
            record.sequence = 1 + max((r.sequence or 0 for r in self.all()), default=0)
            self.save(record)
        finally:
            os.close(fd)

    def all(self) -> list[PipelineRecord]:
        """Every record, in the order the runs started."""
        records = []
        for path in self.root.glob("*.json"):
            records.append(PipelineRecord.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        return sorted(records, key=started_order)

    def latest(self) -> PipelineRecord | None:
        """The run that started last (not the record written last)."""
        records = self.all()
        return records[-1] if records else None

    def mark_interrupted(self) -> int:
        """Records left 'running' by a driver that is dead become 'killed'; returns how many.
        A driver of another host is left alone (the driver watch judges it by its heartbeat:
        `driver_watch.close_records_of_dead_drivers`); a record naming no driver (lmforge
        0.2.0, which held a workdir lock) is one of a dead driver."""
        fixed = 0
        for record in self.all():
            if record.state == "running" and driver_is_dead(record.driver):
                fixed += self.mark_killed(record.run_id)
        return fixed

    def mark_killed(self, run_id: str) -> bool:
        """Mark the run `killed`, with its running and pending stages, if its record (read
        again now: its driver may have just finished it) still says 'running'."""
        try:
            record = self.load(run_id)
        except (OSError, ValueError):
            return False
        if record.state != "running":
            return False
        record.state = "killed"
        for stage in record.stages:
            if stage.state in ("running", "pending"):
                stage.state = "killed"
            stage.holder = None
        self.save(record)
        return True


def started_order(record: PipelineRecord) -> tuple[int, float, str]:
    """Sort key of records by start: by sequence, records written before sequences first."""
    return (record.sequence or 0, record.started_at, record.run_id)


def driver_is_dead(driver: dict[str, Any] | None) -> bool:
    """Whether a record's driver is known to be dead (see `mark_interrupted`)."""
    if driver is None:
        return True
    return "pid" in driver and owner_alive(driver) is False
