"""Leases on a local path and in a real S3-compatible bucket: one holder at a time, renewal,
takeover of a dead or silent holder, and a bucket that ignores conditions refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.storage.leases.lease import Held, Lease, Leases, LeaseSettings, lease_name
from lmforge.pipeline.storage.leases.lease_files import (
    BucketLeaseFiles,
    LocalLeaseFiles,
    open_lease_files,
)

FAST = LeaseSettings(renew_s=0.05, expire_s=0.6)
NAME = lease_name("clean", "0123456789abcdef")


@pytest.fixture(params=["local", "bucket"])
def files(request, tmp_path):
    if request.param == "local":
        return LocalLeaseFiles(tmp_path / "store")
    request.getfixturevalue("s3_in_env")
    return open_lease_files(f"s3://lmforge/leases-{tmp_path.name}")


def test_a_record_changes_only_from_the_state_its_changer_read(files):
    token = files.create(NAME, b'{"a": 1}')
    assert token is not None
    assert files.create(NAME, b'{"a": 2}') is None, "a second create never replaces"
    data, read_token = files.read(NAME)
    assert data == b'{"a": 1}' and read_token == token
    newer = files.replace(NAME, b'{"a": 3}', token)
    assert newer is not None and newer != token
    assert files.replace(NAME, b'{"a": 4}', token) is None, "a stale token changes nothing"
    assert files.delete(NAME, token) is False
    assert files.read(NAME)[0] == b'{"a": 3}'
    assert files.delete(NAME, newer) is True
    assert files.read(NAME) is None


def test_of_many_takers_at_once_exactly_one_holds_the_lease(files):
    takers = [Leases(files, run=f"run-{i}", settings=FAST) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda leases: leases.acquire(NAME), takers))
    try:
        assert sum(isinstance(g, Lease) for g in got) == 1
        winner = next(g for g in got if isinstance(g, Lease))
        for g in got:
            if isinstance(g, Held):
                assert g.holder["run"] == winner.body["run"]
    finally:
        for leases in takers:
            leases.close()


def test_a_renewed_lease_is_never_taken_and_a_silent_one_is_after_expiry(files):
    holder, waiter = Leases(files, "holder", FAST), Leases(files, "waiter", FAST)
    lease = holder.acquire(NAME)
    assert isinstance(lease, Lease)
    started = time.monotonic()
    while time.monotonic() - started < 3 * FAST.expire_s:  # renewed all along: still held
        assert isinstance(waiter.acquire(NAME), Held)
        time.sleep(0.05)
    assert json.loads(files.read(NAME)[0])["counter"] > 5
    holder._stop.set()  # the holder goes silent (a paused or cut-off process)
    time.sleep(FAST.renew_s * 3)
    first = waiter.acquire(NAME)
    assert isinstance(first, Held)
    time.sleep(FAST.expire_s + 0.1)
    taken = waiter.acquire(NAME)
    assert isinstance(taken, Lease) and taken.body["run"] == "waiter"
    assert lease.renew() is False and lease.lost, "the silent holder learns it lost the lease"
    waiter.close()
    holder.close()
    assert files.read(NAME) is None, "the new holder's release leaves no record"


def test_a_dead_holder_on_this_host_is_taken_over_at_once(tmp_path):
    files = LocalLeaseFiles(tmp_path / "store")
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from lmforge.pipeline.storage.leases.lease import Leases, LeaseSettings
        from lmforge.pipeline.storage.leases.lease_files import LocalLeaseFiles
        leases = Leases(LocalLeaseFiles(Path({str(tmp_path / "store")!r})), "doomed",
                        LeaseSettings(renew_s=0.05, expire_s=3600))
        leases.acquire({NAME!r})
        print("held", flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        waiter = Leases(files, "waiter", LeaseSettings(renew_s=0.05, expire_s=3600))
        held = waiter.acquire(NAME)
        assert isinstance(held, Held) and held.holder["run"] == "doomed"
        assert f"pid {proc.pid}" in held.describe()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        taken = waiter.acquire(NAME)
        assert isinstance(taken, Lease), "expiry is an hour away: only death lets it in"
        waiter.close()
    finally:
        proc.kill()


def test_a_bucket_that_ignores_conditional_writes_is_refused_in_one_line(s3_in_env):
    files = BucketLeaseFiles("s3://lmforge/ignores")
    original = files.client.put_object

    def unconditional(**kwargs):  # what a store that drops the headers does
        kwargs.pop("IfNoneMatch", None)
        kwargs.pop("IfMatch", None)
        return original(**kwargs)

    files.client.put_object = unconditional
    with pytest.raises(LmforgeError) as refused:
        files.check_conditional_writes()
    assert "does not honour conditional writes" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_store_without_conditional_writes_of_ours_is_named():
    with pytest.raises(LmforgeError, match="s3://"):
        open_lease_files("gs://bucket/store")


def test_a_bucket_that_rejects_the_conditional_headers_is_refused_in_one_line(s3_in_env):
    files = BucketLeaseFiles("s3://lmforge/rejects")
    ClientError = files.client.exceptions.ClientError
    original = files.client.put_object

    def rejecting(**kwargs):  # what a server that does not implement them answers
        if "IfNoneMatch" in kwargs or "IfMatch" in kwargs:
            error = {"Code": "NotImplemented", "Message": "A header you provided implies "
                     "functionality that is not implemented"}  # fmt: skip
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 501}}, "Put")
        return original(**kwargs)

    files.client.put_object = rejecting
    with pytest.raises(LmforgeError) as refused:
        files.check_conditional_writes()
    assert "does not honour conditional writes" in str(refused.value)
    assert "NotImplemented" in str(refused.value) and "\n" not in str(refused.value)


def test_a_release_while_a_renewal_is_under_way_leaves_no_record(tmp_path):
    files = LocalLeaseFiles(tmp_path / "store")
    for _ in range(60):  # renewals every millisecond, released at any point of one
        leases = Leases(files, "holder", LeaseSettings(renew_s=0.001, expire_s=60))
        lease = leases.acquire(NAME)
        time.sleep(0.002)
        leases.release(lease)
        leases.close()
        assert files.read(NAME) is None
