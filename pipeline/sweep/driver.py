"""Running a sweep: its variants as pipeline runs side by side over one store.

`run_sweep(shared, variants, options)` is the entry point (`lmforge sweep` and whatever builds
its own list of variants call it). Before anything starts, every variant's config is composed
and planned, so a bad key or value fails in one line. Then up to `--max-concurrent` variants run
at once, each as a pipeline run of the DAG runner in a thread of this driver; their stages are
Ray tasks, which Ray schedules as the cluster's resources allow. A stage whose cache key several
variants share is computed by one of them under its lease and taken from the cache by the
others. With `--early-stop`, ASHA (`early_stop`) stops variants on their validation loss; a
stopped variant's model is then committed under `train.stopped_at=N` and evaluated.

The sweep's record (`records`) is kept in the workdir; running the same sweep again finishes
only the variants that are not done.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from lmforge.pipeline.cluster.ray_runtime import ensure_ray, local_dashboard
from lmforge.pipeline.engine.driver import this_driver
from lmforge.pipeline.engine.run_records import PipelineRecord
from lmforge.pipeline.engine.run_request import RunRequest, SweepLink
from lmforge.pipeline.engine.runner import run_pipeline
from lmforge.pipeline.engine.tracking import resolve_tracking_uri
from lmforge.pipeline.errors import LmforgeError, StageFailed
from lmforge.pipeline.sweep.asha_watch import AshaWatch
from lmforge.pipeline.sweep.early_stop import EarlyStopper
from lmforge.pipeline.sweep.grid import Variant
from lmforge.pipeline.sweep.plan import PlannedVariant, plan_sweep, plan_variant
from lmforge.pipeline.sweep.progress import sweep_progress
from lmforge.pipeline.sweep.records import DONE_STATES, SweepBook, SweepRecord, VariantRecord
from lmforge.pipeline.sweep.tracking import (
    close_sweep_run,
    log_variant_figures,
    mark_stopped_attempt,
    open_sweep_run,
    tag_stopped,
)
from lmforge.pipeline.sweep.variant_figures import collect_figures, loss_curves
from lmforge.pipeline.training.early_stop.requests import (
    read_stop,
    request_stop,
    stop_request_file,
    withdraw_stop,
)

log = logging.getLogger("lmforge")

PROGRESS_EVERY_S = 30.0
"""The progress line is printed when a variant changes state, and at least this often."""
TRAIN_START_TIMEOUT_S = "86400"
"""Ray Train's wait for its workers' resources (60 s by default): in a sweep a variant's
workers may wait for another variant's to finish."""


@dataclass(slots=True)
class SweepOptions:
    """How a sweep runs."""

    command: str = "sweep"
    max_concurrent: int | None = None
    """Variants at once (None: all of them; Ray runs their stages as resources allow)."""
    early_stop: bool = False
    grace_period: int | None = None
    reduction_factor: float | None = None
    lease_wait_s: float | None = None
    metric: str = "val_perplexity"
    until: str | None = None
    """The stage each variant stops after (None: the whole pipeline)."""
    scaling: dict | None = None
    """What a scaling grid records of its variants (`SweepRecord.scaling`)."""


def run_sweep(shared: list[str], variants: list[Variant], options: SweepOptions) -> SweepRecord:
    """Run (or finish) the sweep of `variants`, each `shared + variant.overrides()`; returns
    its record. Raises ConfigError before anything starts on a bad key or value."""
    return _Sweep(shared, variants, options).run()


class _Sweep:
    def __init__(self, shared: list[str], variants: list[Variant], options: SweepOptions) -> None:
        self.options = options
        self.shared = shared
        plan = plan_sweep(
            shared,
            variants,
            options.early_stop,
            options.grace_period,
            options.reduction_factor,
            options.until,
        )
        self.planned, self.asha, self.sweep_id = plan.variants, plan.asha, plan.sweep_id
        self.config, self.workdir, self.store_location = (
            plan.config,
            plan.workdir,
            plan.store_location,
        )
        self.book = SweepBook(self.workdir / "sweeps")
        self.lock = threading.Lock()
        self.live: dict[str, PipelineRecord] = {}

    # -- the record ---------------------------------------------------------------------------

    def _open_record(self) -> SweepRecord:
        record = self.book.find(self.sweep_id)
        if record is None:
            record = SweepRecord(
                sweep_id=self.sweep_id,
                command=self.options.command,
                swept=list(self.planned[0].variant.params),
                shared=list(self.shared),
                early_stop=self.asha.to_dict() if self.asha else None,
                metric=self.options.metric,
                variants=[
                    VariantRecord(p.variant.name, dict(p.variant.params), p.variant.overrides())
                    for p in self.planned
                ],
            )
        record.state, record.finished_at = "running", None
        record.driver = this_driver()
        record.until = self.options.until
        record.scaling = self.options.scaling or record.scaling
        for planned in self.planned:
            variant = record.variant(planned.variant.name)
            if variant.state not in DONE_STATES or not self._still_done(variant, planned):
                variant.state, variant.error = "pending", None
                variant.stop_requested_at = None
                if variant.stopped_at is None:
                    variant.stages = dict(planned.stages)
        return record

    def _still_done(self, variant: VariantRecord, planned: PlannedVariant) -> bool:
        """Whether a variant done before is still whole in the store (every stage cached)."""
        if variant.state == "finished":
            return not planned.to_run
        overrides = self._stopped_overrides(planned, variant)
        return not plan_variant(planned.variant, overrides, self.options.until).to_run

    def _save(self) -> None:
        self.book.save(self.record)

    # -- running ------------------------------------------------------------------------------

    def run(self) -> SweepRecord:
        self.record = self._open_record()
        self._save()
        pending = [
            p for p in self.planned if self.record.variant(p.variant.name).state == "pending"
        ]
        uri = resolve_tracking_uri(self.workdir, self.config["cluster"].get("tracking_uri"))
        self.tracking_uri = uri
        experiment = self.config["cluster"].get("experiment", "lmforge")
        self.mlflow, self.record.mlflow_run_id = open_sweep_run(
            uri, self.workdir, experiment, self.record
        )
        self._save()
        done = len(self.planned) - len(pending)
        log.info(
            "sweep %s: %d variants (%d done before), swept %s",
            self.sweep_id,
            len(self.planned),
            done,
            ", ".join(self.record.swept),
        )
        if any(p.to_run for p in pending):
            os.environ.setdefault("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", TRAIN_START_TIMEOUT_S)
            cluster = self.config["cluster"]
            ensure_ray(
                cluster.get("ray_address"),
                cluster.get("num_cpus"),
                self.workdir,
                dashboard=local_dashboard(cluster),
            )
        prefix = _VariantPrefix()
        log.addFilter(prefix)
        try:
            self._run_variants(pending)
        except BaseException:
            self.record.state = "killed"
            self._save()
            raise
        finally:
            log.removeFilter(prefix)
        return self._finish()

    def _run_variants(self, pending: list[PlannedVariant]) -> None:
        slots = self.options.max_concurrent or max(1, len(pending))
        self.slots = slots
        work: queue.Queue[PlannedVariant] = queue.Queue()
        for planned in pending:
            work.put(planned)
        threads = [
            threading.Thread(target=self._worker, args=(work,), daemon=True, name=f"sweep-slot-{i}")
            for i in range(min(slots, len(pending)))
        ]
        for thread in threads:
            thread.start()
        watch = (
            AshaWatch(EarlyStopper(self.asha), self.tracking_uri, self.config, self.workdir)
            if self.asha
            else None
        )
        last_counts, last_time = "", 0.0
        while any(thread.is_alive() for thread in threads):
            for thread in threads:
                thread.join(timeout=1.0 / len(threads))
            if watch is not None:
                with self.lock:
                    live = dict(self.live)
                if watch.look(self.record, live):
                    with self.lock:
                        self._save()
            line = self._progress()
            counts = line.split(", ETA")[0]
            if counts != last_counts or time.time() - last_time > PROGRESS_EVERY_S:
                log.info("%s", line)
                last_counts, last_time = counts, time.time()

    def _worker(self, work: queue.Queue) -> None:
        while True:
            try:
                planned = work.get_nowait()
            except queue.Empty:
                return
            threading.current_thread().name = f"variant-{planned.variant.name}"
            self._run_variant(planned)

    def _run_variant(self, planned: PlannedVariant) -> None:
        variant = self.record.variant(planned.variant.name)
        with self.lock:
            variant.state, variant.started_at, variant.finished_at = "running", time.time(), None
            self._save()
        stop_file = stop_request_file(self.store_location, planned.stages.get("pretrain", ""))
        withdraw_stop(stop_file)  # left by a sweep that died: not this one's decision
        if self.asha and stop_file and variant.stopped_at is None:  # its training waits for ASHA
            request_stop(stop_file, {"sweep": self.sweep_id, "variant": variant.variant})
        try:
            if variant.stopped_at is not None:  # stopped before: commit and evaluate its model
                self._run_stopped(planned, variant)
                return
            try:
                pipeline = self._pipeline(planned, planned.overrides, variant)
            except StageFailed:
                answer = read_stop(stop_file) or {}
                withdraw_stop(stop_file)
                if answer.get("stopped_at") is None:
                    raise
                variant.stopped_at = int(answer["stopped_at"])
                log.info("stopped early at step %d (ASHA on val_loss)", variant.stopped_at)
                if variant.variant in self.live:
                    mark_stopped_attempt(
                        self.mlflow, self.live[variant.variant], variant.stopped_at
                    )
                self._run_stopped(planned, variant)
                return
            withdraw_stop(stop_file)
            self._done(variant, planned, pipeline, "finished")
        except LmforgeError as exc:
            self._failed(variant, stop_file, str(exc))
        except Exception as exc:  # noqa: BLE001 (a fault of ours: this variant fails, not the sweep)
            log.exception("variant %s failed on an unexpected error", variant.variant)
            self._failed(variant, stop_file, f"{type(exc).__name__}: {exc}")

    def _failed(self, variant: VariantRecord, stop_file: str | None, error: str) -> None:
        """Record `variant` failed; its slot goes on with the next variant."""
        withdraw_stop(stop_file)
        with self.lock:
            variant.state, variant.error = "failed", error[:500]
            variant.finished_at = time.time()
            self.live.pop(variant.variant, None)
            self._save()
        log.error("FAILED: %s", error[:300])

    def _run_stopped(self, planned: PlannedVariant, variant: VariantRecord) -> None:
        overrides = self._stopped_overrides(planned, variant)
        stopped = plan_variant(planned.variant, overrides, self.options.until)
        pipeline = self._pipeline(stopped, overrides, variant)
        self._done(variant, stopped, pipeline, "stopped")

    @staticmethod
    def _stopped_overrides(planned: PlannedVariant, variant: VariantRecord) -> list[str]:
        return [*planned.overrides, f"train.stopped_at={variant.stopped_at}"]

    def _pipeline(self, planned: PlannedVariant, overrides: list[str], variant: VariantRecord):
        link = SweepLink(
            sweep_id=self.sweep_id,
            variant=variant.variant,
            parent_run_id=self.record.mlflow_run_id or "",
            params=dict(variant.params),
        )

        def started(pipeline: PipelineRecord) -> None:
            with self.lock:
                self.live[variant.variant] = pipeline
                variant.pipeline_runs.append(pipeline.run_id)
                self._save()

        request = RunRequest(
            config=planned.config,
            command=f"sweep {self.sweep_id} {variant.variant}",
            until=self.options.until,
            lease_wait_s=self.options.lease_wait_s,
            sweep=link,
            on_start=started,
        )
        return run_pipeline(request)

    def _done(
        self, variant: VariantRecord, planned: PlannedVariant, pipeline: PipelineRecord, state: str
    ) -> None:
        figures = collect_figures(planned.config, self.workdir, pipeline)
        with self.lock:
            variant.stages = {s.stage: s.key for s in pipeline.stages}
            variant.stage_states = {s.stage: s.state for s in pipeline.stages}
            variant.metrics = figures
            variant.state, variant.finished_at = state, time.time()
            self.live.pop(variant.variant, None)
            self._save()
        log_variant_figures(self.mlflow, pipeline.mlflow_run_id, figures, variant.wall_s)
        if state == "stopped":
            tag_stopped(self.mlflow, pipeline, variant.stopped_at)

    def _progress(self) -> str:
        with self.lock:
            return sweep_progress(self.record, self.slots)

    def _finish(self) -> SweepRecord:
        from lmforge.pipeline.sweep.summary import table, write_page

        failed = any(v.state == "failed" for v in self.record.variants)
        self.record.state = "failed" if failed else "finished"
        self.record.finished_at = time.time()
        self._save()
        page = write_page(
            self.record, loss_curves(self.config, self.workdir, self.record), self.summary_dir
        )
        best = [v.metrics.get(self.record.metric) for v in self.record.variants]
        best = [b for b in best if isinstance(b, int | float)]
        try:
            close_sweep_run(
                self.mlflow,
                self.record.mlflow_run_id or "",
                page.parent,
                {f"best_{self.record.metric}": min(best)} if best else {},
                failed,
            )
        except Exception as exc:
            log.warning("could not close the sweep's MLflow run: %s", exc)
        print()
        print(table(self.record))
        print(f"summary: {page}")
        return self.record

    @property
    def summary_dir(self) -> Path:
        return self.workdir / "sweeps" / self.sweep_id


class _VariantPrefix(logging.Filter):
    """The runner's lines of a variant's thread start with the variant's name."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = threading.current_thread().name
        if name.startswith("variant-") and not getattr(record, "lmforge_variant", False):
            record.msg = f"[{name.removeprefix('variant-')}] {record.msg}"
            record.lmforge_variant = True
        return True
