"""The runner: walk the plan, launch ready stages as Ray tasks, keep MLflow and records true."""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from lmforge.pipeline.cluster.ray_runtime import ensure_ray, local_dashboard
from lmforge.pipeline.engine import run_storage
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.driver import HeartbeatWatch, this_driver
from lmforge.pipeline.engine.execute import StageTask, failure_message, remote_stage
from lmforge.pipeline.engine.pipeline_runs import PipelineTracking, quietly
from lmforge.pipeline.engine.plan import Plan, committed_since
from lmforge.pipeline.engine.run_records import PipelineRecord, RecordBook, StageRecord
from lmforge.pipeline.engine.run_request import RunRequest, plan_for, run_local_checks
from lmforge.pipeline.engine.stage_leases import (
    LeaseWaitExceeded,
    StageLeases,
    holder_record,
    wait_limit,
)
from lmforge.pipeline.engine.stage_outcomes import StageOutcomes
from lmforge.pipeline.engine.tracking import check_reachable, resolve_tracking_uri
from lmforge.pipeline.engine.workdir import Workdir
from lmforge.pipeline.errors import LmforgeError, StageFailed
from lmforge.pipeline.storage.artifact_store import open_store
from lmforge.pipeline.storage.leases.lease import Held, LeaseSettings
from lmforge.pipeline.storage.settings import StoreSettings

log = logging.getLogger("lmforge")


def run_pipeline(request: RunRequest) -> PipelineRecord:
    """Run (or reuse) every selected stage; raises StageFailed if any stage failed."""
    dag, plan, workdir = plan_for(request)
    run_local_checks(plan, request.config["cluster"])
    workdir.create()
    return _Runner(request, dag, plan, workdir).run()


class _Runner:
    def __init__(self, request: RunRequest, dag: Dag, plan: Plan, workdir: Workdir) -> None:
        self.request, self.dag, self.plan, self.workdir = request, dag, plan, workdir
        self.settings = StoreSettings.from_cluster(request.config["cluster"], workdir.root)
        self.store = open_store(
            request.config["cluster"].get("store_uri"), workdir.root, self.settings
        )
        self.book = RecordBook(workdir.records)
        cluster = request.config.get("cluster", {})
        self.cluster = cluster
        self.local_dashboard = local_dashboard(cluster)  # a bad value fails before anything starts
        self.tracking_uri = resolve_tracking_uri(workdir.root, cluster.get("tracking_uri"))
        self.record = PipelineRecord(
            run_id=time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6],
            command=request.command,
            stages=[StageRecord(stage=n, key=plan.stages[n].key) for n in plan.order],
            driver=this_driver(),
        )
        # A driver's heartbeat keeps the leases' timing: renewed every `cluster.lease_renew_s`,
        # taken as dead after `cluster.lease_expiry_s` unchanged.
        self.timing = LeaseSettings.from_cluster(cluster)
        self.tracking = PipelineTracking(
            self.tracking_uri,
            workdir.root,
            cluster.get("experiment", "lmforge"),
            HeartbeatWatch(self.timing.expire_s),
            self.timing.renew_s,
        )
        self.ray_storage: str | None = None
        self._absent_when_waiting: dict[str, bool] = {}
        self._started: dict[str, float] = {}  # when each launched stage started
        self.outcomes = StageOutcomes(self.record, self.book, self.tracking, plan, self.store)
        self.leases = StageLeases(
            str(cluster.get("store_uri") or workdir.store),
            self.record.run_id,
            self.timing,
            wait_limit(cluster, request.lease_wait_s),
        )

    def run(self) -> PipelineRecord:
        try:
            return self._run()
        finally:
            self.tracking.stop()
            if self.ray_storage is not None:  # interrupted, tasks may still write: see release
                interrupted = self.record.state not in ("finished", "failed")
                quietly(
                    run_storage.release,
                    self.ray_storage,
                    self.record.run_id,
                    keep_owner=interrupted,
                )

    def _run(self) -> PipelineRecord:
        self.book.mark_interrupted()
        self.store.sweep_temporaries()
        if self.plan.to_run():  # Ray Train's storage of this run's own
            self.ray_storage = run_storage.claim_for_run(
                str(self.workdir.root),
                self.cluster.get("store_uri"),
                self.record.run_id,
                self.record.driver or {},
            )
        check_reachable(self.tracking_uri)  # a server that is down fails before Ray starts
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lmforge-tracking") as pool:
            # MLflow's import and a new store's schema (5-6 s of the driver's CPU) overlap
            # Ray's start, which mostly waits for the processes it spawns (7-9 s).
            tracking = pool.submit(self._open_tracking)
            try:
                if self._ray_needed_now():
                    self._start_ray()
                tracking.result()
            except BaseException as exc:
                self._after_failed_start(tracking, exc)
                raise
        try:
            self._walk()
        except BaseException:
            self._mark_killed()
            raise
        finally:
            self.leases.close()
        failed = [s for s in self.record.stages if s.state == "failed"]
        self.record.state = "failed" if failed else "finished"
        self.record.finished_at = time.time()
        self.book.save(self.record)
        self.tracking.close(self.tracking.parent_id, "FAILED" if failed else "FINISHED")
        if failed:
            first = failed[0]
            raise StageFailed(f"stage {first.stage!r} failed: {first.error}")
        return self.record

    def _open_tracking(self) -> None:
        """The MLflow side of a run's start: the experiment (the runs of dead drivers closed),
        the parent run naming this driver with the config as its params, the run's record, and
        the driver's heartbeat."""
        request = self.request
        self.record.mlflow_run_id = self.tracking.open(
            self.record, request.command, request.config, request.sweep
        )
        self.book.start(self.record)  # the first record: a run that never got here has none
        if request.on_start is not None:
            request.on_start(self.record)
        self.tracking.watch_drivers(self.book, self.record.run_id)

    def _ray_needed_now(self) -> bool:
        """Whether a stage is to run that no other live run holds: then Ray starts beside
        MLflow's setup. A run whose every stage to run is held by others waits first, and
        starts Ray only when it launches one (never, when the holders commit them all)."""
        try:
            return any(
                not self.leases.held_elsewhere(name, self.plan.stages[name].key)
                for name in self.plan.to_run()
            )
        except LmforgeError:  # leases this store cannot keep: said when a stage is claimed
            return bool(self.plan.to_run())

    def _start_ray(self) -> None:
        """The Ray runtime, once per process (`ensure_ray` returns at once after that)."""
        ensure_ray(
            self.cluster.get("ray_address"),
            self.cluster.get("num_cpus"),
            self.workdir.root,
            dashboard=self.local_dashboard,
        )

    def _after_failed_start(self, tracking: Future, exc: BaseException) -> None:
        """Ray failed to start, MLflow's setup failed, or Ctrl-C came: once the MLflow side is
        done, its runs become KILLED, as a failure in the walk leaves them. An MLflow error is
        raised rather than Ray's, as when MLflow was set up first."""
        failure = tracking.exception()  # waits for the MLflow side to finish
        if failure is None:
            self._mark_killed()
        elif isinstance(exc, Exception):
            raise failure from None

    def _walk(self) -> None:
        """Launch each stage once its inputs are there, under its lease; a stage whose lease
        another run holds waits for it without holding up the others."""
        pending = list(self.plan.order)
        running: dict[Any, str] = {}
        while pending or running:
            waiting = False
            for name in list(pending):
                state = self._readiness(name)
                if state == "wait":
                    continue
                if state == "skip":
                    pending.remove(name)
                    self.outcomes.set(name, state="skipped", error="an upstream stage failed")
                elif self.plan.stages[name].action == "cached":
                    pending.remove(name)
                    self.outcomes.reuse(name)
                elif self._claim(name):
                    pending.remove(name)
                    if self.record.stage(name).state == "pending":
                        running[self._launch(name)] = name
                else:
                    waiting = True
            if not running:
                if waiting:
                    self.leases.pause()
                continue
            import ray

            timeout = self.leases.poll_s if waiting else None
            done, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
            for ref in done:
                self._collect(running.pop(ref), ref)

    def _claim(self, name: str) -> bool:
        """Take the lease on a stage to run; False while another run holds it. Under the
        lease the store is looked at again: a stage another run committed meanwhile is a cache
        hit (its lease given up at once). A wait past `--lease-wait` fails the stage."""
        key = self.plan.stages[name].key
        try:
            claim = self.leases.claim(name, key)
        except LeaseWaitExceeded as exc:
            self.outcomes.set(name, state="failed", error=str(exc), holder=None)
            log.error("%-16s FAILED   %s", name, exc)
            return True
        if isinstance(claim, Held):
            if self._appeared(name):  # committed by the holder, which has not let go yet
                self.outcomes.reuse(name)
                return True
            holder = holder_record(claim.holder)
            if self.record.stage(name).holder != holder:
                self.outcomes.set(name, holder=holder)
            return False
        if committed_since(self.plan, self.dag.stages[name], self.store):
            self.leases.release(name)
            self.plan.stages[name].action = "cached"
            self.outcomes.reuse(name)
        return True

    def _appeared(self, name: str) -> bool:
        """Whether the artifact of a stage that was absent when it began to wait is committed
        now (a copy being rebuilt is waited for until its holder lets go of the lease)."""
        if name in self.plan.force:
            return False
        absent = self._absent_when_waiting.setdefault(name, not self._committed(name))
        if not absent or not self._committed(name):
            return False
        if not committed_since(self.plan, self.dag.stages[name], self.store):
            self._absent_when_waiting[name] = False  # not usable here: wait for the lease
            return False
        self.plan.stages[name].action = "cached"
        return True

    def _readiness(self, name: str) -> str:
        states = [self.record.stage(u).state for u in self.dag.stages[name].inputs]
        if any(s in ("failed", "skipped") for s in states):
            return "skip"
        if all(s in ("cached", "ran") for s in states):
            return "ready"
        return "wait"

    def _launch(self, name: str):
        spec = self.dag.stages[name]
        stage_plan = self.plan.stages[name]
        run_id = self.outcomes.stage_run(name, cached=False, source_run_id=None)
        task = StageTask(
            stage=name,
            key=stage_plan.key,
            version=spec.version,
            sections=stage_plan.sections,
            typed_config=stage_plan.typed_config,
            input_keys=stage_plan.input_keys,
            workdir=str(self.workdir.root),
            store_uri=self.request.config["cluster"].get("store_uri"),
            tracking_uri=self.tracking_uri,
            mlflow_run_id=run_id,
            store=self.settings,
            pipeline_run=self.record.run_id,
            rebuild=name in self.plan.force or self._committed(name),
            leases=self.timing,
            lease_wait_s=self.leases.wait_s,
        )
        self.outcomes.set(
            name, state="running", mlflow_run_id=run_id, holder=self.leases.holder(name)
        )
        self._started[name] = time.time()
        log.info("%-16s running  %s", name, stage_plan.key)
        self._start_ray()  # not yet when every stage to run was another run's at the start
        return remote_stage(spec, stage_plan.typed_config).remote(task)

    def _committed(self, name: str) -> bool:
        """Whether the store holds an artifact of the stage's key (damaged, or too small, as
        it is to run): its commit then replaces it."""
        try:
            return self.store.exists(name, self.plan.stages[name].key)
        except LmforgeError:  # a manifest that does not parse
            return True

    def _collect(self, name: str, ref) -> None:
        import ray

        duration = time.time() - self._started[name]
        try:
            result = ray.get(ref)
        except Exception as exc:  # RayTaskError wraps the stage's exception; keep its cause
            self.leases.release(name)
            self.outcomes.failed(name, failure_message(exc), duration)
            return
        self.leases.release(name)
        self.outcomes.ran(name, result["artifact"], duration, result.get("warning"))

    def _mark_killed(self) -> None:
        """On Ctrl-C or any driver crash, every open run becomes KILLED, never FINISHED."""
        self.outcomes.mark_killed()
