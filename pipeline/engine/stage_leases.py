"""The runner's leases on stage keys: a run claims a stage's key before it launches the stage, so
of all the runs sharing a store (one workdir, a shared path, a bucket) one computes each key and
the others take its artifact from the cache.

A run that finds a key claimed waits without holding up its other stages: it looks again every
`poll_s` seconds, says once per holder what it waits for (`wait_line`), takes the artifact as a
cache hit once the holder has committed it (the runner looks at the store while it waits), and
takes the lease over when the holder dies or fails without committing (then computes the stage,
resuming its finished tasks). Past `--lease-wait` it gives
up on that stage in one line (`LeaseWaitExceeded`). See `storage/leases` for the records.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from lmforge.pipeline.errors import ConfigError, LmforgeError
from lmforge.pipeline.storage.leases.lease import (
    Held,
    Lease,
    Leases,
    LeaseSettings,
    decode_holder,
    describe_holder,
    lease_name,
)
from lmforge.pipeline.storage.leases.lease_files import LeaseFiles, open_lease_files
from lmforge.pipeline.storage.temporaries import owner_alive

log = logging.getLogger("lmforge")

POLL_S = 1.0
"""How often a run looks again at a lease another run holds (at most; less with a shorter
`cluster.lease_renew_s`)."""
LEASE_WAIT_HELP = (
    "wait at most SECONDS for a stage another run is computing, then fail naming it "
    "(default: cluster.lease_wait_s, no limit)"
)
HOLDER_FIELDS = ("run", "host", "pid", "since")
"""What `lmforge status` shows of a lease's holder (`since`: seconds since the epoch)."""


class LeaseWaitExceeded(LmforgeError):
    """A live run held a stage's lease longer than this run would wait."""


class LeaseLost(LmforgeError):
    """Another run took over a lease this run held: it was not renewed for the expiry time."""


def wait_limit(cluster: dict[str, Any], flag: float | None = None) -> float | None:
    """How long a run waits for a held lease: `--lease-wait` when given, else
    `cluster.lease_wait_s`; None: as long as the holder lives."""
    if flag is not None:
        value, key = flag, "--lease-wait"
    else:
        value, key = cluster.get("lease_wait_s"), "cluster.lease_wait_s"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{key} must be a number of seconds (0 or more), got {value!r}")
    return float(value)


def holder_record(holder: dict[str, Any]) -> dict[str, Any]:
    """The part of a lease record that `status` shows."""
    return {name: holder.get(name) for name in HOLDER_FIELDS}


def wait_line(stage: str, holder: dict[str, Any], what: str = "it") -> str:
    """The one line a run prints while it waits for another run's lease on `stage` (or, with
    `what`, on something `stage` works with)."""
    return f"{stage:<16} waiting  for {describe_holder(holder)} to finish {what}"


def wait_exceeded(holder: dict[str, Any], limit_s: float) -> str:
    """Why a run gave up a stage after waiting `limit_s` seconds for its lease (the runner
    names the stage)."""
    return (
        f"{describe_holder(holder)} is computing it, longer than --lease-wait {limit_s:g}s; run "
        "again once that run is done (its artifact is then a cache hit), stop that run, or "
        "wait longer (--lease-wait SECONDS; cluster.lease_wait_s=null waits as long as it lives)"
    )


class StageLeases:
    """The leases one run takes on the stage keys of its store, renewed in the background."""

    def __init__(
        self,
        location: str,
        run_id: str,
        settings: LeaseSettings | None = None,
        wait_s: float | None = None,
    ) -> None:
        """location: the store's path or URI (the lease records live beside its artifacts)."""
        self.location = location
        self.run_id = run_id
        self.settings = settings or LeaseSettings()
        self.wait_s = wait_s
        self.poll_s = min(POLL_S, self.settings.renew_s)
        self._leases: Leases | None = None
        self._held: dict[str, Lease] = {}
        self._announced: dict[str, tuple] = {}

    def claim(self, stage: str, key: str) -> Lease | Held:
        """The lease on `stage`'s `key`, or who holds it (announced once per holder); raises
        `LeaseWaitExceeded` once this run has waited longer than `wait_s`."""
        got = self._open().acquire(lease_name(stage, key))
        if isinstance(got, Lease):
            self._held[stage] = got
            self._announced.pop(stage, None)
            return got
        if self.wait_s is not None and got.waited_s >= self.wait_s:
            raise LeaseWaitExceeded(wait_exceeded(got.holder, self.wait_s))
        who = tuple(got.holder.get(name) for name in HOLDER_FIELDS)
        if self._announced.get(stage) != who:
            self._announced[stage] = who
            log.info("%s", wait_line(stage, got.holder))
        return got

    def held_elsewhere(self, stage: str, key: str) -> bool:
        """Whether another run holds the lease on `stage`'s `key` now, and is not known dead
        (a dead holder of this host is taken over at once: then this run computes the stage)."""
        holder = self._files().read(lease_name(stage, key))
        if holder is None:
            return False
        record = decode_holder(holder[0])
        return not ("pid" in record and owner_alive(record) is False)

    def holder(self, stage: str) -> dict[str, Any] | None:
        """This run's lease on `stage`, as `status` shows it; None when it holds none."""
        lease = self._held.get(stage)
        return None if lease is None else holder_record(lease.body)

    def _open(self) -> Leases:
        if self._leases is None:  # the bucket's probe only when a stage is to run
            self._leases = Leases(open_lease_files(self.location), self.run_id, self.settings)
        return self._leases

    def _files(self) -> LeaseFiles:
        return self._open().files

    def release(self, stage: str) -> None:
        """Give up the lease on `stage` (after its commit or its failure)."""
        lease = self._held.pop(stage, None)
        if lease is not None and self._leases is not None:
            self._leases.release(lease)

    def close(self) -> None:
        """Stop renewing and release every lease still held (the run ends, or fails)."""
        self._held.clear()
        if self._leases is not None:
            self._leases.close()

    def pause(self) -> None:
        """Wait before looking at the held leases again."""
        time.sleep(self.poll_s)


@contextlib.contextmanager
def holding(
    location: str,
    name: str,
    *,
    run_id: str,
    stage: str,
    what: str,
    settings: LeaseSettings | None = None,
    wait_s: float | None = None,
) -> Iterator[Lease]:
    """Hold the lease `name` (its record under `location`) while the block runs: data outside
    artifacts that runs of several keys share, as pretrain's checkpoints of one lineage.

    While another live run holds it, wait, saying once per holder for whom (`stage`, `what`);
    past `wait_s` raise `LeaseWaitExceeded`. If another run took the lease over meanwhile (this
    process was not renewed for the expiry time), raise `LeaseLost` after the block, so that
    the stage commits nothing made beside that run."""
    settings = settings or LeaseSettings()
    leases = Leases(open_lease_files(location), run_id, settings)
    announced: tuple | None = None
    try:
        while True:
            got = leases.acquire(name)
            if isinstance(got, Lease):
                break
            if wait_s is not None and got.waited_s >= wait_s:
                raise LeaseWaitExceeded(f"{what}: {wait_exceeded(got.holder, wait_s)}")
            who = tuple(got.holder.get(field) for field in HOLDER_FIELDS)
            if who != announced:
                announced = who
                log.info("%s", wait_line(stage, got.holder, f"with {what}"))
            time.sleep(min(POLL_S, settings.renew_s))
        yield got
        if got.lost:
            raise LeaseLost(
                f"another run took over {what} while this run worked on it (its lease was not "
                "renewed for cluster.lease_expiry_s); run again"
            )
    finally:
        leases.close()
