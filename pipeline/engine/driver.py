"""Which driver a pipeline run belongs to, and whether that driver is known to be dead.

A driver names itself by the record temporaries use (`temporaries.current_owner`): host, boot id,
pid and the pid's start time in clock ticks (so a reused pid is not taken for the driver). On
this host (same host name and boot) that record says at once whether the driver lives. A driver
on another host is judged by its heartbeat: it raises a counter every few seconds, and an observer
that sees no change for `expire_s` seconds of its *own* monotonic clock takes it for dead.
Timestamps written by other hosts are never compared, so an observer that has not watched a
remote driver for `expire_s` yet leaves it alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lmforge.pipeline.storage.temporaries import current_owner, owner_alive

DRIVER_TAGS = {
    "host": "lmforge.driver.host",
    "boot_id": "lmforge.driver.boot_id",
    "pid": "lmforge.driver.pid",
    "start_ticks": "lmforge.driver.start_ticks",
}
"""The MLflow tags of a pipeline's parent run that name its driver, by owner record field."""
HEARTBEAT_TAG = "lmforge.driver.heartbeat"
"""A counter the driver raises on its parent run every `HEARTBEAT_S` seconds."""
HEARTBEAT_S = 10.0
EXPIRE_S = 60.0
"""An observer that sees no heartbeat for this long (its own clock) takes the driver for dead."""


def this_driver() -> dict[str, Any]:
    """This process's owner record: what a run records of its driver."""
    return current_owner()


def driver_tags(driver: Mapping[str, Any]) -> dict[str, str]:
    """The driver's record as MLflow tags."""
    return {tag: str(driver[name]) for name, tag in DRIVER_TAGS.items() if driver.get(name)}


def driver_of_tags(tags: Mapping[str, str]) -> dict[str, Any] | None:
    """The driver a run's tags name; None for a run of an lmforge that recorded none."""
    if DRIVER_TAGS["pid"] not in tags or DRIVER_TAGS["host"] not in tags:
        return None
    driver: dict[str, Any] = {name: tags.get(tag, "") for name, tag in DRIVER_TAGS.items()}
    try:
        driver["pid"] = int(driver["pid"])
        driver["start_ticks"] = int(driver["start_ticks"]) if driver["start_ticks"] else None
    except ValueError:
        return None
    return driver


def alive_here(driver: Mapping[str, Any] | None) -> bool | None:
    """True or False for a driver of this host and boot; None for one elsewhere or unnamed."""
    if not driver or "pid" not in driver:
        return None
    return owner_alive(dict(driver))


@dataclass
class HeartbeatWatch:
    """Heartbeats seen by this process, each with when (its own monotonic clock) it last changed."""

    expire_s: float = EXPIRE_S
    _seen: dict[str, tuple[str | None, float]] = field(default_factory=dict)

    def expired(self, run_id: str, beat: str | None, now: float) -> bool:
        """Whether `run_id`'s heartbeat, `beat` now, has not changed for `expire_s` (`now` is
        `time.monotonic()`); a heartbeat seen for the first time or changed never has."""
        seen = self._seen.get(run_id)
        if seen is None or seen[0] != beat:
            self._seen[run_id] = (beat, now)
            return False
        return now - seen[1] >= self.expire_s


def driver_dead(run_id: str, tags: Mapping[str, str], watch: HeartbeatWatch, now: float) -> bool:
    """Whether the driver of the pipeline run whose parent MLflow run is `run_id` (with `tags`)
    is known to be dead: on this host by its pid and start time, elsewhere by a heartbeat that
    `watch` saw unchanged for its expiry time. A run naming no driver (an older lmforge) has a
    heartbeat that never changes."""
    alive = alive_here(driver_of_tags(tags))
    if alive is not None:
        return not alive
    return watch.expired(run_id, tags.get(HEARTBEAT_TAG), now)


def record_driver_dead(
    driver: Mapping[str, Any] | None,
    parent_run_id: str | None,
    parent_tags: Mapping[str, str] | None,
    watch: HeartbeatWatch,
    now: float,
) -> bool:
    """Whether the driver of a run record left `running` is known to be dead: a record naming
    no driver is lmforge 0.2.0's (which held a workdir lock: its run is over); on this host by
    the driver's pid and start time; elsewhere by the heartbeat on its parent MLflow run
    (`parent_tags`), unchanged for `watch`'s expiry time on this observer's clock. A remote
    driver with no parent run to read (deleted, unreachable) is never judged dead."""
    if driver is None:
        return True
    alive = alive_here(driver)
    if alive is not None:
        return not alive
    if parent_run_id is None or parent_tags is None:
        return False
    return watch.expired(parent_run_id, parent_tags.get(HEARTBEAT_TAG), now)
