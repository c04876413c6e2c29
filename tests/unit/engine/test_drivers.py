"""Whose runs a starting pipeline may close: a driver is dead on this host when its pid is gone or
is another process now; elsewhere when its heartbeat stood still for the expiry time of the
observer's own clock. Run records and MLflow runs follow the same judgement; "latest" is the run
that started last."""

from __future__ import annotations

import pytest
from dead_driver import dead_driver as exited_driver

from lmforge.pipeline.engine.driver import (
    HEARTBEAT_TAG,
    HeartbeatWatch,
    alive_here,
    driver_dead,
    driver_of_tags,
    driver_tags,
    record_driver_dead,
    this_driver,
)
from lmforge.pipeline.engine.run_records import PipelineRecord, RecordBook, StageRecord


@pytest.fixture
def dead_driver() -> dict:
    return exited_driver()


def test_this_process_is_alive_and_an_exited_one_is_dead(dead_driver):
    assert alive_here(this_driver()) is True
    assert alive_here(dead_driver) is False


def test_a_reused_pid_is_not_taken_for_the_driver():
    reused = {**this_driver(), "start_ticks": this_driver()["start_ticks"] - 1}
    assert alive_here(reused) is False


def test_a_driver_of_another_host_or_boot_is_not_judged_by_its_pid():
    assert alive_here({**this_driver(), "host": "elsewhere"}) is None
    assert alive_here({**this_driver(), "boot_id": "another-boot"}) is None
    assert alive_here(None) is None


def test_the_driver_round_trips_through_mlflow_tags():
    driver = this_driver()
    assert driver_of_tags(driver_tags(driver)) == driver
    assert driver_of_tags({"lmforge.pipeline_run": "x"}) is None


def test_a_heartbeat_expires_only_after_standing_still_for_the_expiry_time():
    watch = HeartbeatWatch(expire_s=60)
    assert not watch.expired("r", "3", now=1000.0)  # first seen: never expired
    assert not watch.expired("r", "3", now=1059.0)
    assert not watch.expired("r", "4", now=1070.0)  # it beat: the clock starts again
    assert not watch.expired("r", "4", now=1129.0)
    assert watch.expired("r", "4", now=1130.0)


def test_a_remote_driver_is_dead_by_heartbeat_and_a_local_one_by_pid(dead_driver):
    watch = HeartbeatWatch(expire_s=60)
    remote = {**driver_tags({**this_driver(), "host": "elsewhere"}), HEARTBEAT_TAG: "7"}
    assert not driver_dead("remote", remote, watch, now=0.0)
    assert driver_dead("remote", remote, watch, now=60.0)
    live = {**driver_tags(this_driver()), HEARTBEAT_TAG: "7"}
    assert not driver_dead("live", live, watch, now=0.0)
    assert not driver_dead("live", live, watch, now=600.0), "a live local pid never expires"
    assert driver_dead("dead", driver_tags(dead_driver), watch, now=0.0), "at once"


def _record(run_id: str, started_at: float, **fields) -> PipelineRecord:
    return PipelineRecord(
        run_id=run_id,
        command="run",
        started_at=started_at,
        stages=[StageRecord(stage="clean", key="k", state="running")],
        **fields,
    )


def test_latest_is_the_run_that_started_last_not_the_record_written_last(tmp_path):
    book = RecordBook(tmp_path)
    book.save(_record("legacy", started_at=500.0))  # written before sequences existed
    first, second = _record("first", started_at=900.0), _record("second", started_at=100.0)
    book.start(first)
    book.start(second)  # a host whose clock is behind starts after `first`
    book.save(first)  # `first` is written again, last
    assert [r.run_id for r in book.all()] == ["legacy", "first", "second"]
    assert book.latest().run_id == "second"
    assert (first.sequence, second.sequence) == (1, 2)


def test_only_records_of_dead_drivers_are_marked_killed(tmp_path, dead_driver):
    book = RecordBook(tmp_path)
    book.save(_record("live", 1.0, driver=this_driver()))
    book.save(_record("dead", 2.0, driver=dead_driver))
    book.save(_record("remote", 3.0, driver={**this_driver(), "host": "elsewhere"}))
    book.save(_record("legacy", 4.0))  # lmforge 0.2.0 named no driver and held a workdir lock
    assert book.mark_interrupted() == 2
    states = {r.run_id: (r.state, r.stages[0].state) for r in book.all()}
    assert states == {
        "live": ("running", "running"),
        "dead": ("killed", "killed"),
        "remote": ("running", "running"),
        "legacy": ("killed", "killed"),
    }


def test_a_record_of_a_remote_driver_is_dead_only_once_its_heartbeat_stood_still(dead_driver):
    """On the observer's own clock: what the remote host wrote (`since`, times) never counts."""
    watch = HeartbeatWatch(expire_s=60)
    remote = {**this_driver(), "host": "elsewhere", "since": 0.0}
    beating = {HEARTBEAT_TAG: "7"}
    assert not record_driver_dead(remote, "parent", beating, watch, now=1000.0)  # first seen
    assert not record_driver_dead(remote, "parent", beating, watch, now=1059.0)
    beat = {HEARTBEAT_TAG: "8"}
    assert not record_driver_dead(remote, "parent", beat, watch, now=1100.0), "it beat"
    assert not record_driver_dead(remote, "parent", beat, watch, now=1159.0)
    assert record_driver_dead(remote, "parent", beat, watch, now=1160.0)
    assert not record_driver_dead(remote, None, None, watch, now=1e9), "nothing to judge by"
    assert not record_driver_dead(remote, "gone", None, watch, now=1e9), "parent run deleted"
    assert not record_driver_dead(this_driver(), "p", beating, watch, now=1e9), "a live pid"
    assert record_driver_dead(dead_driver, "p", beating, watch, now=0.0), "a dead pid at once"
    assert record_driver_dead(None, None, None, watch, now=0.0), "lmforge 0.2.0's record"


def test_a_sweep_kills_the_runs_of_dead_drivers_and_of_no_other(tmp_path, dead_driver):
    from dead_driver import orphan_pipeline

    from lmforge.pipeline.engine.driver_watch import kill_runs_of_dead_drivers
    from lmforge.pipeline.engine.tracking import client, ensure_experiment

    mlflow = client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = ensure_experiment(mlflow, "lmforge", (tmp_path / "art").as_uri())

    live = orphan_pipeline(mlflow, experiment, this_driver(), "live")
    dead = orphan_pipeline(mlflow, experiment, dead_driver, "dead")
    remote = orphan_pipeline(mlflow, experiment, {**this_driver(), "host": "elsewhere"}, "remote")
    mlflows_own = mlflow.create_run(experiment, run_name="not lmforge's").info.run_id
    watch = HeartbeatWatch(expire_s=60)

    def statuses() -> dict[str, str]:
        runs = {"live": live, "dead": dead, "remote": remote}
        found = {n: {mlflow.get_run(r).info.status for r in ids} for n, ids in runs.items()}
        return {n: "/".join(sorted(s)) for n, s in found.items()}

    assert kill_runs_of_dead_drivers(mlflow, experiment, watch, now=0.0) == 2
    assert statuses() == {"live": "RUNNING", "dead": "KILLED", "remote": "RUNNING"}
    mlflow.set_tag(remote[0], HEARTBEAT_TAG, "2")  # the remote driver beats at 30 s
    assert kill_runs_of_dead_drivers(mlflow, experiment, watch, now=30.0) == 0
    assert kill_runs_of_dead_drivers(mlflow, experiment, watch, now=89.0) == 0
    assert kill_runs_of_dead_drivers(mlflow, experiment, watch, now=90.0) == 2
    assert statuses() == {"live": "RUNNING", "dead": "KILLED", "remote": "KILLED"}
    assert mlflow.get_run(mlflows_own).info.status == "RUNNING"


def test_ray_storage_of_dead_drivers_runs_goes_and_that_of_live_or_remote_ones_stays(
    tmp_path, dead_driver
):
    from lmforge.pipeline.engine import run_storage

    location = str(tmp_path / "ray_storage")
    owners = {
        "live": this_driver(),
        "dead": dead_driver,
        "remote": {**this_driver(), "host": "elsewhere"},
    }
    for run_id, driver in owners.items():
        run_storage.claim(location, run_id, driver)
        (tmp_path / "ray_storage" / run_id / "pretrain-x").mkdir(parents=True)
    assert run_storage.sweep_dead(location) == 1
    left = sorted(p.name for p in (tmp_path / "ray_storage").iterdir())
    assert left == ["live", "live.owner.json", "remote", "remote.owner.json"]
    run_storage.release(location, "live")  # the run ends
    run_storage.release(location, "remote", keep_owner=True)  # interrupted: its tasks may write
    assert [p.name for p in (tmp_path / "ray_storage").iterdir()] == ["remote.owner.json"]


def test_a_run_releasing_its_storage_while_another_sweeps_it_breaks_neither(tmp_path, monkeypatch):
    """Two variants of a sweep start in one driver: one lists the owner records while the other
    releases its own; the listed record is gone by the time it is read (seen as a
    FileNotFoundError that ended a sweep variant)."""
    from pathlib import Path

    from lmforge.pipeline.engine import run_storage

    location = str(tmp_path / "ray_storage")
    run_storage.claim(location, "ending", this_driver())
    is_file = Path.is_file

    def released_once_listed(path: Path) -> bool:
        found = is_file(path)
        if path.name == "ending.owner.json":
            run_storage.release(location, "ending")  # the other variant's run ends here
        return found

    monkeypatch.setattr(Path, "is_file", released_once_listed)
    assert run_storage.sweep_dead(location) == 0
    monkeypatch.undo()
    assert list((tmp_path / "ray_storage").iterdir()) == []


def test_a_live_driver_beats_and_closes_a_silent_remote_driver_once_it_expires(tmp_path):
    import time

    from dead_driver import orphan_pipeline

    from lmforge.pipeline.engine.driver_watch import DriverWatch
    from lmforge.pipeline.engine.tracking import client, ensure_experiment

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow = client(uri)
    experiment = ensure_experiment(mlflow, "lmforge", (tmp_path / "art").as_uri())
    ours = orphan_pipeline(mlflow, experiment, this_driver(), "ours")
    elsewhere = {**this_driver(), "host": "elsewhere"}
    silent = orphan_pipeline(mlflow, experiment, elsewhere, "silent")
    beating = orphan_pipeline(mlflow, experiment, elsewhere, "beating")
    # The workdir's run records, shared with the remote host: its live run and its dead one.
    book = RecordBook(tmp_path / "pipeline_runs")
    records = {"ours": ours, "silent": silent, "beating": beating}
    for name, runs in records.items():
        driver = this_driver() if name == "ours" else elsewhere
        book.save(_record(name, 1.0, driver=driver, mlflow_run_id=runs[0]))
    watch = DriverWatch(
        uri, experiment, ours[0], heartbeat_s=0.2, expire_s=1.0, book=book, own_run="ours"
    ).start()
    try:
        deadline = time.monotonic() + 60
        beats = 0
        # The record and the MLflow runs are judged in turn, each on its own clock reading: a
        # busy machine can see the record expire a sweep before the runs do.
        while book.load("silent").state == "running" or any(
            mlflow.get_run(run).info.status == "RUNNING" for run in silent
        ):
            assert time.monotonic() < deadline, "the silent driver's run was never closed"
            beats += 1
            mlflow.set_tag(beating[0], HEARTBEAT_TAG, str(beats))  # the live remote driver
            time.sleep(0.2)
    finally:
        watch.stop()
    assert {mlflow.get_run(run).info.status for run in silent} == {"KILLED"}
    assert book.load("silent").stages[0].state == "killed"
    assert {mlflow.get_run(run).info.status for run in ours + beating} == {"RUNNING"}
    assert book.load("ours").state == "running" and book.load("beating").state == "running"
    assert int(mlflow.get_run(ours[0]).data.tags[HEARTBEAT_TAG]) > 3  # it beat meanwhile


def test_a_record_its_driver_finished_meanwhile_is_never_marked_killed(tmp_path, dead_driver):
    book = RecordBook(tmp_path)
    judged = _record("finishing", 1.0, driver=dead_driver)
    book.save(judged)
    book.save(_record("finishing", 1.0, driver=dead_driver, state="finished"))  # it just ended
    assert not book.mark_killed("finishing")
    assert book.load("finishing").state == "finished"


def test_a_sweeps_variant_is_judged_by_its_own_driver_not_the_sweeps_run(tmp_path, dead_driver):
    """A sweep's variants nest their pipeline runs under the sweep's run, which names no driver
    and has no heartbeat: a live variant stays RUNNING however long it runs; a dead one's runs
    are KILLED."""
    from dead_driver import orphan_pipeline

    from lmforge.pipeline.engine.driver_watch import kill_runs_of_dead_drivers
    from lmforge.pipeline.engine.tracking import client, ensure_experiment

    mlflow = client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = ensure_experiment(mlflow, "lmforge", (tmp_path / "art").as_uri())
    sweep = mlflow.create_run(experiment, tags={"lmforge.sweep": "sweep-1"}).info.run_id
    live = orphan_pipeline(mlflow, experiment, this_driver(), "live")
    dead = orphan_pipeline(mlflow, experiment, dead_driver, "dead")
    for pipeline_run in (live[0], dead[0]):
        mlflow.set_tag(pipeline_run, "mlflow.parentRunId", sweep)
    watch = HeartbeatWatch(expire_s=60)
    for now in (0.0, 120.0, 600.0):
        kill_runs_of_dead_drivers(mlflow, experiment, watch, now=now)
    assert {mlflow.get_run(r).info.status for r in live} == {"RUNNING"}
    assert {mlflow.get_run(r).info.status for r in dead} == {"KILLED"}
    assert mlflow.get_run(sweep).info.status == "RUNNING"
