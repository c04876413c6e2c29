"""What a pipeline run records of its stages, kept in step in its run record (what `lmforge
status` reads) and in MLflow: a stage cached, launched, run, failed or killed."""

from __future__ import annotations

import logging
import time
from typing import Any

from lmforge.pipeline.engine.pipeline_runs import PipelineTracking, quietly
from lmforge.pipeline.engine.plan import Plan
from lmforge.pipeline.engine.run_records import PipelineRecord, RecordBook
from lmforge.pipeline.storage.artifact_store import ArtifactStore

log = logging.getLogger("lmforge")


class StageOutcomes:
    """The stages' entries of one pipeline run's record and their MLflow stage runs."""

    def __init__(
        self,
        record: PipelineRecord,
        book: RecordBook,
        tracking: PipelineTracking,
        plan: Plan,
        store: ArtifactStore,
    ) -> None:
        self.record, self.book, self.tracking = record, book, tracking
        self.plan, self.store = plan, store

    def set(self, name: str, **fields: Any) -> None:
        """Update the stage's entry of the record, saved at once."""
        entry = self.record.stage(name)
        for key, value in fields.items():
            setattr(entry, key, value)
        self.book.save(self.record)

    def stage_run(self, name: str, *, cached: bool, source_run_id: str | None) -> str:
        return self.tracking.stage_run(
            self.record, name, self.plan.stages[name], cached=cached, source_run_id=source_run_id
        )

    def reuse(self, name: str) -> None:
        """The stage is a cache hit: a FINISHED stage run naming the run that made the artifact
        (closed too, if its task left it open)."""
        key = self.plan.stages[name].key
        manifest = self.store.manifest(name, key) or {}
        source = manifest.get("mlflow_run_id")
        if source and self.tracking.finish_producing(source):
            log.info("%-16s its producing MLflow run %s is now FINISHED", name, source)
        run_id = self.stage_run(name, cached=True, source_run_id=source)
        self.tracking.close(run_id, "FINISHED")
        self.set(
            name,
            state="cached",
            artifact=str(self.store.path(name, key)),
            mlflow_run_id=run_id,
            holder=None,
        )
        log.info("%-16s cached   %s", name, key)

    def ran(self, name: str, artifact: str, duration: float, warning: str | None) -> None:
        """The stage ran: recorded with its artifact; with a warning, its MLflow run (which
        its task may have left open) is closed FINISHED."""
        self.set(
            name,
            state="ran",
            artifact=artifact,
            duration_s=round(duration, 2),
            warning=warning,
            holder=None,
        )
        log.info("%-16s ran      %.1fs", name, duration)
        if warning:
            log.warning("lmforge: warning: %s: %s", name, warning)
            quietly(self.tracking.finish_producing, self.record.stage(name).mlflow_run_id)

    def failed(self, name: str, message: str, duration: float) -> None:
        """The stage's task failed: unless it committed first (`committed_before_failing`), its
        run is closed FAILED (if its task has not closed it) and the record says why."""
        run_id = self.record.stage(name).mlflow_run_id
        if self.committed_before_failing(name, run_id, message, duration):
            return
        if run_id:
            self.tracking.close_if_running(run_id, "FAILED")
        self.set(
            name,
            state="failed",
            error=message[:500],
            duration_s=round(duration, 2),
            holder=None,
        )
        log.error("%-16s FAILED   %s", name, message[:300])

    def committed_before_failing(
        self, name: str, run_id: str | None, message: str, duration: float
    ) -> bool:
        """A stage whose task failed after committing its artifact (its process died between
        the commit and closing its MLflow run) has succeeded: the artifact is this run's when its
        manifest names this stage run. Then the stage ran, its run is closed FINISHED (tagged
        `lmforge.closed_after_commit`) and the stages below it run; returns whether it was so."""
        key = self.plan.stages[name].key
        try:
            manifest = self.store.manifest(name, key)
        except Exception:  # unreadable: not a commit to build on
            manifest = None
        if not run_id or not manifest or manifest.get("mlflow_run_id") != run_id:
            return False
        warning = f"its process failed after committing the artifact ({message[:300]})"
        self.ran(name, str(self.store.path(name, key)), duration, warning)
        return True

    def mark_killed(self) -> None:
        """On Ctrl-C or any driver crash, every open run becomes KILLED, never FINISHED."""
        for stage in self.record.stages:
            stage.holder = None
            if stage.state in ("running", "pending"):
                stage.state = "killed"
                if stage.mlflow_run_id:
                    quietly(self.tracking.close, stage.mlflow_run_id, "KILLED")
        self.record.state = "killed"
        self.record.finished_at = time.time()
        self.book.save(self.record)
        quietly(self.tracking.close, self.tracking.parent_id, "KILLED")
