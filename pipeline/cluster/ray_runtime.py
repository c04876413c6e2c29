"""Starting or attaching to Ray: a local runtime by default, a cluster with an address.

A local runtime runs with token authentication: its GCS (and its dashboard and Jobs API, which
it starts only with `cluster.local_dashboard`) accept only requests carrying the token in
`<workdir>/.ray_token` (mode 0600, created once and reused), so no other local user can submit
tasks or jobs to it. Attaching to a cluster uses the cluster's own token
(RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), as Ray reads it.
"""

from __future__ import annotations

import logging
import os
import secrets
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from lmforge.durable import write_atomic
from lmforge.pipeline.errors import ConfigError, LmforgeError

log = logging.getLogger(__name__)

TOKEN_FILE = ".ray_token"
AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
LOCAL_DEFAULTS = {
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "LMFORGE_TRAIN_RESOURCE_REQUESTS": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5",
}
"""Settings of a local runtime, unless the caller's environment sets them. Ray's dashboard sends
usage data to usage-stats.ray.io a minute after a runtime starts and hourly after, unless it is
disabled: a local runtime reaches nothing beyond this machine. Ray Train's preemption
watcher is one more actor process that asks the GCS every 5 s for nodes being drained: a local
runtime has one node and ends with its run, so it only takes CPU from the training ranks as they
start (about 2 s of CPU a run on two cores). Nor has it an autoscaler to ask for the ranks'
resources (`training.trainer.RESOURCE_REQUESTS_ENV`). Ray Train's controller polls its ranks every
`RAY_TRAIN_HEALTH_CHECK_INTERVAL_S` (2 s by default) and learns only then that they finished:
at 0.5 s a pretrain stage ends 1-2 s sooner (the tests' small model on a 2-core Zen 4, runs
interleaved: resuming a finished 20-step run 21.7 s on average at 2 s and 19.7 s at 0.5 s, four
each; training it from scratch 23.5 s and 22.5 s, two each), for a call to each rank's actor
four times a second."""
WITHOUT_DASHBOARD_DEFAULTS = {"LMFORGE_TRAIN_PG_CLEANER": "0"}
"""Added to `LOCAL_DEFAULTS` when a local runtime starts without its dashboard (the default,
`cluster.local_dashboard`): Ray Train's placement-group cleaner, one more actor process, asks the
dashboard's state API every second whether the controller lives, to free the run's CPUs if it
died; a local runtime ends with its run, which frees them anyway (`training.trainer
.PG_CLEANER_ENV`). With the dashboard's processes and that polling the demo's pretrain took
about 5% longer on a 2-core machine."""
_saved_env: dict[str, str | None] = {}
"""The caller's values of the variables a local runtime sets (its auth, `LOCAL_DEFAULTS` and,
without the dashboard, `WITHOUT_DASHBOARD_DEFAULTS`), restored at shutdown."""


def local_settings(dashboard: bool = False) -> dict[str, str]:
    """What a local runtime sets in the environment (unless the caller's sets it):
    `LOCAL_DEFAULTS`, and `WITHOUT_DASHBOARD_DEFAULTS` when it starts without its dashboard."""
    return LOCAL_DEFAULTS if dashboard else LOCAL_DEFAULTS | WITHOUT_DASHBOARD_DEFAULTS


def local_dashboard(cluster: dict) -> bool:
    """`cluster.local_dashboard`: false (the default) or true; anything else is a config error."""
    value = cluster.get("local_dashboard", False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"cluster.local_dashboard must be true or false, got {value!r}")
    return value


def ensure_ray(
    address: str | None,
    num_cpus: int | None = None,
    workdir: Path | None = None,
    dashboard: bool = False,
) -> None:
    """Initialise Ray once per process; an unreachable address is one clear error.

    Without an address, a fresh local runtime starts with the token of `workdir` (a private
    temporary directory when none is given), and with Ray's dashboard only if `dashboard`.
    """
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    kwargs: dict = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address:
        _check_reachable(address)
        kwargs["address"] = address
    else:
        _use_local_token(local_token(workdir or Path(tempfile.mkdtemp(prefix="lmforge-ray-"))))
        _use_local_defaults(local_settings(dashboard))
        # A fresh local runtime ("local": never attach to another cluster running on this
        # machine), on loopback whatever interfaces the machine has.
        kwargs.update(
            address="local",
            num_cpus=num_cpus or os.cpu_count(),
            include_dashboard=dashboard,
            _node_ip_address="127.0.0.1",
        )
        if dashboard:  # on loopback, on a free port, behind the token
            kwargs.update(dashboard_host="127.0.0.1", dashboard_port=_free_port())
    try:
        _init_with_retry(ray, kwargs)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        _restore_env()
        where = address or "a local runtime"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LmforgeError(
            f"cannot connect to Ray at {where}: {first[:200]}; check --ray-address "
            "(or cluster.ray_address) and that the cluster is up (`ray status`)"
        ) from exc


CLIENT_INIT_ATTEMPTS = 3
_CLIENT_SERVER_LOST = "Initialization failure from server"


def _init_with_retry(ray, kwargs: dict) -> None:
    """`ray.init`, retried when Ray Client's proxy loses the per-client server it starts.

    A `ray://` connection makes the cluster's proxy spawn a server for this client; under load
    that spawn sometimes dies before answering (an upstream race), which is transient: a fresh
    connection gets a fresh server. Every other failure is raised at once.
    """
    is_client = str(kwargs.get("address", "")).startswith("ray://")
    for attempt in range(1, CLIENT_INIT_ATTEMPTS + 1):
        try:
            ray.init(**kwargs)
            return
        except ConnectionAbortedError as exc:
            if not is_client or _CLIENT_SERVER_LOST not in str(exc):
                raise
            if attempt == CLIENT_INIT_ATTEMPTS:
                raise
            log.warning(
                "Ray Client's server for this connection failed to start (attempt %d of %d); "
                "reconnecting",
                attempt,
                CLIENT_INIT_ATTEMPTS,
            )
            ray.shutdown()
            time.sleep(2.0 * attempt)


def local_token(workdir: Path) -> Path:
    """`<workdir>/.ray_token`, created once with a fresh 256-bit token and readable only by us.

    A token file that another user could read (or an empty one) is replaced by a new one.
    """
    path = workdir / TOKEN_FILE
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and not info.st_mode & 0o077 and info.st_size:
            return path
    except FileNotFoundError:
        pass
    workdir.mkdir(parents=True, exist_ok=True)
    write_atomic(path, secrets.token_hex(32), mode=0o600)
    return path


def _use_local_token(token_path: Path) -> None:
    """Token mode with `token_path` for this process and the Ray processes it starts."""
    _remember_env(AUTH_ENV)
    os.environ.pop("RAY_AUTH_TOKEN", None)  # it would win over the file (a cluster's token)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(token_path.resolve())
    _reload_ray_auth()


def _reload_ray_auth() -> None:
    """Ray caches the auth mode and the token per process: reload both from the environment
    (the config first, as Ray does), or a later runtime here would present a stale token."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _use_local_defaults(defaults: dict[str, str]) -> None:
    """`defaults` for this process and the Ray processes it starts (they inherit them)."""
    _remember_env(defaults)
    for name, value in defaults.items():
        os.environ.setdefault(name, value)


def _remember_env(names: Iterable[str]) -> None:
    """Keep the caller's values of `names` (the first ones seen) for `_restore_env`."""
    for name in names:
        _saved_env.setdefault(name, os.environ.get(name))


def _restore_env() -> None:
    """Put back the caller's values `_remember_env` kept, and Ray's view of its auth."""
    if not _saved_env:
        return
    for name, value in _saved_env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _saved_env.clear()
    _reload_ray_auth()


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, not minutes, when a Ray address does not answer."""
    import socket

    target = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    target = target.split("://", 1)[-1]
    if not target or ":" not in target:
        return  # "auto" without RAY_ADDRESS: Ray finds the local cluster itself
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise LmforgeError(
            f"cannot connect to Ray at {address}: {exc}; check --ray-address (or "
            "cluster.ray_address), that the cluster is up (`ray status`) and that "
            "RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH holds the cluster's token"
        ) from exc


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    _restore_env()
