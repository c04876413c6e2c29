"""Holding, renewing, observing and taking over leases (see `lease_files` for the records).

A lease names the process that holds it (host, boot, pid and start time, as temporaries do),
the run it works for and a renewal counter. Its holder renews it every `renew_s` seconds,
raising the counter. Another process that finds it held:

- takes it over at once when its holder lived on this host and is dead;
- takes it over when it has seen no change of the record for `expire_s` seconds of *its own*
  clock (timestamps written by other hosts are shown to people, never compared);
- otherwise waits, and can say for whom (`Held`).

Every takeover and renewal is a compare-and-swap on the record read last, so of two takers one
wins, and a holder that was paused past its expiry learns at its next renewal that it lost the
lease (`Lease.lost`), before it could publish anything.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.storage.leases.lease_files import LeaseFiles
from lmforge.pipeline.storage.temporaries import current_owner, owner_alive

log = logging.getLogger("lmforge")

LEASE_SUFFIX = ".lease.json"


def lease_name(stage: str, key: str) -> str:
    """The record of the lease on computing `stage` under `key`, beside its artifacts."""
    return f"{stage}/.{key}{LEASE_SUFFIX}"


DEFAULT_RENEW_S = 10.0
DEFAULT_EXPIRE_S = 60.0


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    renew_s: float = DEFAULT_RENEW_S
    """How often a holder renews its leases (`cluster.lease_renew_s`)."""
    expire_s: float = DEFAULT_EXPIRE_S
    """How long an observer waits without seeing a renewal before it takes a lease over
    (`cluster.lease_expiry_s`)."""

    @classmethod
    def from_cluster(cls, cluster: dict[str, Any]) -> LeaseSettings:
        """From the `cluster` config section; a bad value fails naming its key."""
        renew = _positive(cluster.get("lease_renew_s"), "cluster.lease_renew_s", DEFAULT_RENEW_S)
        expire = _positive(
            cluster.get("lease_expiry_s"), "cluster.lease_expiry_s", DEFAULT_EXPIRE_S
        )
        if expire <= renew:
            raise ConfigError(
                f"cluster.lease_expiry_s ({expire:g}) must be longer than cluster.lease_renew_s "
                f"({renew:g}), or live holders lose their leases; raise it"
            )
        return cls(renew_s=renew, expire_s=expire)


def describe_holder(holder: dict[str, Any]) -> str:
    """`run R on host H (pid P) since HH:MM:SS`, for people (`since` on the holder's clock)."""
    since = holder.get("since")
    when = time.strftime("%H:%M:%S", time.localtime(since)) if since else "?"
    return (
        f"run {holder.get('run', '?')} on host {holder.get('host', '?')} "
        f"(pid {holder.get('pid', '?')}) since {when}"
    )


@dataclass(frozen=True, slots=True)
class Held:
    """A lease another process holds: who, and for how long this process has waited on it."""

    name: str
    holder: dict[str, Any]
    waited_s: float

    def describe(self) -> str:
        """`run R on host H (pid P) since HH:MM:SS`, for people."""
        return describe_holder(self.holder)


@dataclass(slots=True)
class Lease:
    """A lease this process holds."""

    files: LeaseFiles
    name: str
    body: dict[str, Any]
    token: str
    lost: bool = False
    released: bool = False
    _change: threading.Lock = field(default_factory=threading.Lock, repr=False)
    """Renewal (the background thread) and release (the runner) one at a time: a release with
    the token a renewal is replacing would miss the record and leave it behind."""

    def renew(self) -> bool:
        """Raise the counter; False (and `lost`) when another process took the lease."""
        with self._change:
            if self.lost or self.released:
                return not self.lost
            body = dict(self.body, counter=int(self.body.get("counter", 0)) + 1)
            token = self.files.replace(self.name, _encode(body), self.token)
            if token is None:
                self.lost = True
                log.warning("lmforge: warning: lost the lease %s to another run", self.name)
                return False
            self.body, self.token = body, token
            return True

    def release(self) -> None:
        """Give the lease up (nothing happens when it was lost meanwhile)."""
        with self._change:
            if not self.released and not self.lost:
                self.files.delete(self.name, self.token)
            self.released = True


@dataclass(slots=True)
class _Seen:
    token: str
    since: float
    """`time.monotonic()` when this process first saw the record with this token."""


@dataclass
class Leases:
    """The leases one process takes on a store's stages, renewed in the background."""

    files: LeaseFiles
    run: str
    """The run this process works for, named in every lease it holds."""
    settings: LeaseSettings = field(default_factory=LeaseSettings)
    _held: dict[str, Lease] = field(default_factory=dict)
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _waiting: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _renewer: threading.Thread | None = None

    def acquire(self, name: str) -> Lease | Held:
        """The lease `name` if it is free, or its holder is dead or expired; else who holds it."""
        now = time.monotonic()
        self._waiting.setdefault(name, now)
        while True:
            body = {**current_owner(), "run": self.run, "since": time.time(), "counter": 0}
            token = self.files.create(name, _encode(body))
            if token is not None:
                return self._hold(Lease(self.files, name, body, token))
            record = self.files.read(name)
            if record is None:
                continue  # released between our create and our read: try again
            data, token = record
            holder = decode_holder(data)
            seen = self._seen.get(name)
            if seen is None or seen.token != token:
                self._seen[name] = seen = _Seen(token, now)
            dead = "pid" in holder and owner_alive(holder) is False
            expired = now - seen.since >= self.settings.expire_s
            if dead or expired:
                new = self.files.replace(name, _encode(body), token)
                if new is not None:
                    why = "its holder is dead" if dead else "it was not renewed"
                    log.info("lmforge: took over the lease %s (%s)", name, why)
                    return self._hold(Lease(self.files, name, body, new))
                continue  # another process changed it first: look again
            return Held(name, holder, now - self._waiting[name])

    def holder(self, name: str) -> dict[str, Any] | None:
        """Who holds `name` now, as its record says; None when nobody does."""
        record = self.files.read(name)
        return None if record is None else decode_holder(record[0])

    def release(self, lease: Lease) -> None:
        with self._lock:
            self._held.pop(lease.name, None)
        lease.release()
        self._waiting.pop(lease.name, None)
        self._seen.pop(lease.name, None)

    def close(self) -> None:
        """Stop renewing and release every lease still held."""
        self._stop.set()
        with self._lock:
            held = list(self._held.values())
            self._held.clear()
        for lease in held:
            lease.release()

    def _hold(self, lease: Lease) -> Lease:
        self._waiting.pop(lease.name, None)
        self._seen.pop(lease.name, None)
        with self._lock:
            self._held[lease.name] = lease
            if self._renewer is None:
                self._renewer = threading.Thread(
                    target=self._renew_forever, name="lmforge-leases", daemon=True
                )
                self._renewer.start()
        return lease

    def _renew_forever(self) -> None:
        while not self._stop.wait(self.settings.renew_s):
            with self._lock:
                held = list(self._held.values())
            for lease in held:
                try:
                    lease.renew()
                except Exception as exc:  # a store hiccup: the next round tries again
                    log.warning("lmforge: warning: could not renew %s: %s", lease.name, exc)


def _positive(value: Any, key: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{key} must be a positive number of seconds, got {value!r}")
    return float(value)


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True).encode("utf-8")


def decode_holder(data: bytes) -> dict[str, Any]:
    """A lease record's body; {} when it cannot be read."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}  # torn by a crash mid-write: a holder nobody can name, judged by expiry
    return body if isinstance(body, dict) else {}
