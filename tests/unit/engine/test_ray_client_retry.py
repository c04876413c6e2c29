"""Attaching through Ray Client retries only the proxy's lost per-client server."""

from __future__ import annotations

import pytest

from lmforge.pipeline.cluster import ray_runtime


class FakeRay:
    """Records `init`/`shutdown` calls; `init` raises the queued errors first."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = list(errors)
        self.inits = 0
        self.shutdowns = 0

    def init(self, **kwargs) -> None:
        self.inits += 1
        if self.errors:
            raise self.errors.pop(0)

    def shutdown(self) -> None:
        self.shutdowns += 1


LOST = ConnectionAbortedError("Initialization failure from server:\n")


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(ray_runtime.time, "sleep", lambda s: None)


def test_a_lost_client_server_is_reconnected_until_one_answers():
    ray = FakeRay([LOST, LOST])
    ray_runtime._init_with_retry(ray, {"address": "ray://127.0.0.1:10001"})
    assert (ray.inits, ray.shutdowns) == (3, 2)


def test_the_last_attempt_raises_the_loss():
    ray = FakeRay([LOST] * ray_runtime.CLIENT_INIT_ATTEMPTS)
    with pytest.raises(ConnectionAbortedError):
        ray_runtime._init_with_retry(ray, {"address": "ray://127.0.0.1:10001"})
    assert ray.inits == ray_runtime.CLIENT_INIT_ATTEMPTS


@pytest.mark.parametrize(
    ("address", "error"),
    [
        ("127.0.0.1:6379", LOST),  # not Ray Client: nothing spawns a per-client server
        ("ray://127.0.0.1:10001", ConnectionAbortedError("Call to `ray.init()` failed")),
        ("ray://127.0.0.1:10001", ConnectionError("unreachable")),
    ],
)
def test_every_other_failure_is_raised_at_once(address, error):
    ray = FakeRay([error])
    with pytest.raises(type(error)):
        ray_runtime._init_with_retry(ray, {"address": address})
    assert ray.inits == 1
