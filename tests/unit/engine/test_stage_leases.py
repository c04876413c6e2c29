"""The runner's leases on stage keys, on a real lease directory: what a waiting run says and
when it gives up, the settings' checks, and what `status` shows of a stage's holder."""

from __future__ import annotations

import json
import logging
import time

import pytest

from lmforge.pipeline.cli.main import _parser
from lmforge.pipeline.cli.status import status_json, status_table
from lmforge.pipeline.engine.run_records import PipelineRecord, StageRecord
from lmforge.pipeline.engine.stage_leases import (
    LeaseWaitExceeded,
    StageLeases,
    wait_limit,
    wait_line,
)
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.storage.leases.lease import Held, Lease, LeaseSettings

FAST = LeaseSettings(renew_s=0.05, expire_s=30)
HOLDER = {"run": "20261206-101500-abcdef", "host": "node-7", "pid": 4242, "since": time.time()}


def test_the_wait_line_names_the_stage_the_holder_its_host_pid_and_since_when():
    line = wait_line("tokenize", HOLDER)
    since = time.strftime("%H:%M:%S", time.localtime(HOLDER["since"]))
    assert line.startswith("tokenize         waiting  for run 20261206-101500-abcdef")
    assert f"on host node-7 (pid 4242) since {since}" in line
    assert "\n" not in line


def test_the_wait_limit_comes_from_the_flag_else_the_config_else_none():
    assert wait_limit({}) is None
    assert wait_limit({"lease_wait_s": None}) is None
    assert wait_limit({"lease_wait_s": 30}) == 30.0
    assert wait_limit({"lease_wait_s": 30}, 0) == 0.0, "the flag wins, 0 included"
    with pytest.raises(ConfigError, match="cluster.lease_wait_s"):
        wait_limit({"lease_wait_s": -1})
    with pytest.raises(ConfigError, match="--lease-wait"):
        wait_limit({}, -5)
    with pytest.raises(ConfigError, match="cluster.lease_wait_s"):
        wait_limit({"lease_wait_s": True})


def test_lease_timing_defaults_and_checks():
    assert LeaseSettings.from_cluster({}) == LeaseSettings(renew_s=10.0, expire_s=60.0)
    short = LeaseSettings.from_cluster({"lease_renew_s": 0.5, "lease_expiry_s": 3})
    assert (short.renew_s, short.expire_s) == (0.5, 3.0)
    with pytest.raises(ConfigError, match="cluster.lease_renew_s must be a positive"):
        LeaseSettings.from_cluster({"lease_renew_s": 0})
    with pytest.raises(ConfigError, match="lease_expiry_s .* must be longer"):
        LeaseSettings.from_cluster({"lease_renew_s": 10, "lease_expiry_s": 10})


def test_run_rerun_and_submit_take_lease_wait():
    for argv in (["run"], ["rerun", "clean"], ["submit"]):
        assert _parser().parse_args([*argv, "--lease-wait", "12"]).lease_wait == 12.0
        assert _parser().parse_args(argv).lease_wait is None


def test_a_waiting_run_says_so_once_per_holder_and_gives_up_past_its_limit(tmp_path, caplog):
    holder = StageLeases(str(tmp_path / "store"), "holder-run", FAST)
    waiter = StageLeases(str(tmp_path / "store"), "waiter-run", FAST, wait_s=0.5)
    try:
        assert isinstance(holder.claim("clean", "k1"), Lease)
        assert holder.holder("clean")["run"] == "holder-run"
        with caplog.at_level(logging.INFO, logger="lmforge"):
            first = waiter.claim("clean", "k1")
            second = waiter.claim("clean", "k1")
        assert isinstance(first, Held) and isinstance(second, Held)
        lines = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
        assert len(lines) == 1 and "run holder-run" in lines[0]
        time.sleep(0.6)
        with pytest.raises(LeaseWaitExceeded, match="run holder-run .* --lease-wait 0.5s"):
            waiter.claim("clean", "k1")
        assert isinstance(waiter.claim("tokenize", "k2"), Lease), "other keys are free"
        holder.release("clean")
        assert holder.holder("clean") is None
        assert isinstance(waiter.claim("clean", "k1"), Lease)
    finally:
        holder.close()
        waiter.close()
    assert not list((tmp_path / "store").rglob("*.lease.json")), "closing releases every lease"


def test_a_stage_is_held_elsewhere_only_by_another_live_run(tmp_path):
    """What decides whether a run starts Ray before it waits: a stage another live run holds
    is not one it will compute soon; a free one, or one of a dead holder, is."""
    from dead_driver import dead_driver

    from lmforge.pipeline.storage.leases.lease_files import LocalLeaseFiles

    store = tmp_path / "store"
    other = StageLeases(str(store), "other-run", FAST)
    ours = StageLeases(str(store), "our-run", FAST)
    try:
        assert not ours.held_elsewhere("clean", "k1"), "nobody holds it"
        assert isinstance(other.claim("clean", "k1"), Lease)
        assert ours.held_elsewhere("clean", "k1")
        files = LocalLeaseFiles(store)
        assert files.create("clean/.k2.lease.json", json.dumps(dead_driver()).encode())
        assert not ours.held_elsewhere("clean", "k2"), "a dead holder is taken over at once"
    finally:
        other.close()
        ours.close()


def test_holding_waits_for_a_live_holder_says_for_whom_once_and_then_holds_it(tmp_path, caplog):
    """What a stage holds beside its key's lease (pretrain: its lineage's checkpoints)."""
    import threading

    from lmforge.pipeline.engine.stage_leases import holding

    holder = StageLeases(str(tmp_path), "holder-run", FAST)
    assert isinstance(holder.claim("pretrain", "lineage"), Lease)
    threading.Timer(0.5, holder.close).start()  # the holder is done with it in half a second
    where = {"run_id": "waiter-run", "stage": "pretrain", "what": "the checkpoints"}
    name = "pretrain/.lineage.lease.json"
    with (
        caplog.at_level(logging.INFO, logger="lmforge"),
        holding(str(tmp_path), name, settings=FAST, **where) as got,
    ):
        assert json.loads((tmp_path / name).read_text())["run"] == "waiter-run"
    lines = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "for run holder-run" in lines[0] and lines[0].endswith("to finish with the checkpoints")
    assert got.released and not list(tmp_path.rglob("*.lease.json")), "released after the block"


def test_holding_gives_up_past_the_wait_limit_and_fails_when_its_lease_was_taken(tmp_path):
    from lmforge.pipeline.engine.stage_leases import LeaseLost, holding

    holder = StageLeases(str(tmp_path), "holder-run", FAST)
    assert isinstance(holder.claim("pretrain", "lineage"), Lease)
    where = {"run_id": "waiter-run", "stage": "pretrain", "what": "the checkpoints of lineage L"}
    name = "pretrain/.lineage.lease.json"
    try:
        with (
            pytest.raises(LeaseWaitExceeded, match="the checkpoints of lineage L: run holder-run"),
            holding(str(tmp_path), name, settings=FAST, wait_s=0.2, **where),
        ):
            raise AssertionError("never held")
    finally:
        holder.close()
    with (
        pytest.raises(LeaseLost, match="another run took over the checkpoints of lineage L"),
        holding(str(tmp_path), name, settings=FAST, **where) as got,
    ):
        got.lost = True  # as a renewal finds it once another run took it over


def _record(holder: dict | None) -> PipelineRecord:
    return PipelineRecord(
        run_id="r1",
        command="run",
        stages=[
            StageRecord(stage="clean", key="k1", state="cached"),
            StageRecord(stage="tokenize", key="k2", state="pending", holder=holder),
        ],
    )


def test_status_shows_a_stages_holder_beside_the_frozen_fields():
    entries = json.loads(status_json(_record(HOLDER)))
    assert entries[1]["holder"] == HOLDER and entries[0]["holder"] is None
    frozen = ("stage", "key", "state", "artifact", "mlflow_run_id", "duration_s", "error")
    assert all(set(frozen) <= set(entry) for entry in entries)
    table = status_table(_record(HOLDER))
    header = next(line for line in table.splitlines() if line.startswith("stage"))
    assert header.split()[:6] == ["stage", "key", "state", "duration", "MLflow", "run"]
    assert header.endswith("held by")
    assert "run 20261206-101500-abcdef on host node-7 (pid 4242)" in table
    assert "held by" not in status_table(_record(None)), "a finished run's table is as before"
