"""The local Ray runtime that `lmforge run` starts accepts only requests carrying the token in
`<workdir>/.ray_token`, a file readable by its owner alone; any other local user's request to its
dashboard or Jobs API (when it runs one: `cluster.local_dashboard=true`) is refused.
"""

from __future__ import annotations

import os
import stat
import urllib.error
import urllib.request

import pytest

from lmforge.pipeline.cluster.ray_runtime import TOKEN_FILE, ensure_ray, local_token, shutdown_ray


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _jobs_api_status(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url + "/api/jobs/", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_token_file_is_created_once_readable_only_by_its_owner(tmp_path):
    path = local_token(tmp_path)
    token = path.read_text()
    assert path == tmp_path / TOKEN_FILE
    assert _mode(path) == 0o600
    assert len(token) == 64 and int(token, 16) >= 0  # 256 bits, hex
    assert local_token(tmp_path).read_text() == token  # reused, not regenerated


def test_a_token_file_others_could_read_is_replaced(tmp_path):
    path = tmp_path / TOKEN_FILE
    path.write_text("0" * 64)
    path.chmod(0o644)
    assert local_token(tmp_path).read_text() != "0" * 64
    assert _mode(path) == 0o600


@pytest.mark.integration
def test_the_local_runtime_refuses_requests_without_the_workdir_token(tmp_path, monkeypatch):
    import ray

    # Whatever the caller has set for a cluster must not weaken the local runtime.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "f" * 64)
    ensure_ray(None, num_cpus=1, workdir=tmp_path, dashboard=True)
    try:
        url = "http://" + ray._private.worker.global_worker.node.address_info["webui_url"]
        token = (tmp_path / TOKEN_FILE).read_text().strip()
        assert _mode(tmp_path / TOKEN_FILE) == 0o600
        assert _jobs_api_status(url, None) in (401, 403)
        assert _jobs_api_status(url, "f" * 64) in (401, 403)
        assert _jobs_api_status(url, token) == 200
        assert ray.get(ray.remote(lambda: 1 + 1).remote()) == 2  # workers hold the token too
    finally:
        shutdown_ray()
    assert os.environ["RAY_AUTH_MODE"] == "disabled"  # the caller's settings come back
    assert os.environ["RAY_AUTH_TOKEN"] == "f" * 64
