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
from lmforge.pipeline.engine.driver_watch import DriverWatch
from lmforge.pipeline.engine.execute import StageTask, failure_message, remote_stage
from lmforge.pipeline.engine.pipeline_runs import (
    create_parent_run,
    create_stage_run,
    open_experiment,
    quietly,
)
from lmforge.pipeline.engine.plan import Plan, committed_since
from lmforge.pipeline.engine.run_records import PipelineRecord, RecordBook, StageRecord
from lmforge.pipeline.engine.run_request import RunRequest, plan_for, run_local_checks
from lmforge.pipeline.engine.stage_leases import (
    LeaseWaitExceeded,
    StageLeases,
    holder_record,
    wait_limit,
)
from lmforge.pipeline.engine.tracking import (
    check_reachable,
    close_producing_run,
    resolve_tracking_uri,
)
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
        self.heartbeats = HeartbeatWatch(self.timing.expire_s)
        self.driver_watch: DriverWatch | None = None
        self.ray_storage: str | None = None
        self._absent_when_waiting: dict[str, bool] = {}
        self._started: dict[str, float] = {}  # when each launched stage started
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
            if self.driver_watch is not None:
                self.driver_watch.stop()
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
        self.mlflow.set_terminated(self.parent_id, status="FAILED" if failed else "FINISHED")
        if failed:
            first = failed[0]
            raise StageFailed(f"stage {first.stage!r} failed: {first.error}")
        return self.record

    def _open_tracking(self) -> None:
        """The MLflow side of a run's start: the experiment (the runs of dead drivers closed),
        the parent run naming this driver with the config as its params, the run's record, and
        the driver's heartbeat."""
        name = self.cluster.get("experiment", "lmforge")
        self.mlflow, self.experiment_id = open_experiment(
            self.tracking_uri, self.workdir.root, name, self.heartbeats
        )
        self.parent_id = create_parent_run(
            self.mlflow,
            self.experiment_id,
            self.record,
            self.request.command,
            self.request.config,
            self.request.sweep,
        )
        self.record.mlflow_run_id = self.parent_id
        self.book.start(self.record)  # the first record: a run that never got here has none
        if self.request.on_start is not None:
            self.request.on_start(self.record)
        self.driver_watch = DriverWatch(
            self.tracking_uri,
            self.experiment_id,
            self.parent_id,
            heartbeat_s=self.timing.renew_s,
            watch=self.heartbeats,
            book=self.book,
            own_run=self.record.run_id,
        ).start()

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

    def _child_run(self, name: str, cached: bool, source_run_id: str | None) -> str:
        return create_stage_run(
            self.mlflow,
            self.experiment_id,
            self.parent_id,
            self.record,
            name,
            self.plan.stages[name],
            cached=cached,
            source_run_id=source_run_id,
        )

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
                    self._set(name, state="skipped", error="an upstream stage failed")
                elif self.plan.stages[name].action == "cached":
                    pending.remove(name)
                    self._reuse(name)
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
            self._set(name, state="failed", error=str(exc), holder=None)
            log.error("%-16s FAILED   %s", name, exc)
            return True
        if isinstance(claim, Held):
            if self._appeared(name):  # committed by the holder, which has not let go yet
                self._reuse(name)
                return True
            holder = holder_record(claim.holder)
            if self.record.stage(name).holder != holder:
                self._set(name, holder=holder)
            return False
        if committed_since(self.plan, self.dag.stages[name], self.store):
            self.leases.release(name)
            self.plan.stages[name].action = "cached"
            self._reuse(name)
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

    def _reuse(self, name: str) -> None:
        key = self.plan.stages[name].key
        manifest = self.store.manifest(name, key) or {}
        source = manifest.get("mlflow_run_id")
        if source and close_producing_run(self.mlflow, source):
            log.info("%-16s its producing MLflow run %s is now FINISHED", name, source)
        run_id = self._child_run(name, cached=True, source_run_id=source)
        self.mlflow.set_terminated(run_id, status="FINISHED")
        self._set(
            name,
            state="cached",
            artifact=str(self.store.path(name, key)),
            mlflow_run_id=run_id,
            holder=None,
        )
        log.info("%-16s cached   %s", name, key)

    def _launch(self, name: str):
        spec = self.dag.stages[name]
        stage_plan = self.plan.stages[name]
        run_id = self._child_run(name, cached=False, source_run_id=None)
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
        self._set(name, state="running", mlflow_run_id=run_id, holder=self.leases.holder(name))
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
            message = failure_message(exc)
            run_id = self.record.stage(name).mlflow_run_id
            if self._committed_before_failing(name, run_id, message, duration):
                return
            if run_id and self.mlflow.get_run(run_id).info.status == "RUNNING":
                self.mlflow.set_terminated(run_id, status="FAILED")
            self._set(
                name,
                state="failed",
                error=message[:500],
                duration_s=round(duration, 2),
                holder=None,
            )
            log.error("%-16s FAILED   %s", name, message[:300])
            return
        self.leases.release(name)
        self._ran(name, result["artifact"], duration, result.get("warning"))

    def _committed_before_failing(
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
        self._ran(name, str(self.store.path(name, key)), duration, warning)
        return True

    def _ran(self, name: str, artifact: str, duration: float, warning: str | None) -> None:
        """The stage ran: recorded with its artifact; with a warning, its MLflow run (which
        its task may have left open) is closed FINISHED."""
        self._set(
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
            quietly(close_producing_run, self.mlflow, self.record.stage(name).mlflow_run_id)

    def _set(self, name: str, **fields: Any) -> None:
        record = self.record.stage(name)
        for key, value in fields.items():
            setattr(record, key, value)
        self.book.save(self.record)

    def _mark_killed(self) -> None:
        """On Ctrl-C or any driver crash, every open run becomes KILLED, never FINISHED."""
        for stage in self.record.stages:
            stage.holder = None
            if stage.state in ("running", "pending"):
                stage.state = "killed"
                if stage.mlflow_run_id:
                    quietly(self.mlflow.set_terminated, stage.mlflow_run_id, status="KILLED")
        self.record.state = "killed"
        self.record.finished_at = time.time()
        self.book.save(self.record)
        quietly(self.mlflow.set_terminated, self.parent_id, status="KILLED")
