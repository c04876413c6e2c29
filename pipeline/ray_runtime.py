"""Starting or attaching to Ray: a local runtime by default, a cluster with an address."""

from __future__ import annotations

import logging
import os

from lmforge.pipeline.errors import LmforgeError


def ensure_ray(address: str | None, num_cpus: int | None = None) -> None:
    """Initialise Ray once per process; an unreachable address is one clear error."""
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
        # A fresh local runtime ("local": never attach to another cluster running on this
        # machine), on loopback whatever interfaces the machine has.
        kwargs.update(
            address="local",
            num_cpus=num_cpus or os.cpu_count(),
            # Ray Train's placement-group cleaner asks the state API, served by the dashboard;
            # bound to loopback, on a free port.
            include_dashboard=True,
            dashboard_host="127.0.0.1",
            dashboard_port=_free_port(),
            _node_ip_address="127.0.0.1",
        )
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        where = address or "a local runtime"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LmforgeError(
            f"cannot connect to Ray at {where}: {first[:200]}; check --ray-address "
            "(or cluster.ray_address) and that the cluster is up (`ray status`)"
        ) from exc


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
