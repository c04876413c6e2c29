"""Shared fixtures: a fresh workdir per test and quiet, loopback-only services."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import cli_runner
import pytest
from cli_runner import stop_ray
from collected_ids import record_collected
from counting_s3 import reset
from cpu_by_test import register as register_cpu_by_test
from mlflow_server import running_mlflow_server

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)


TESTS = Path(__file__).resolve().parent

SLOW_FOLDERS = ("integration", "fault")
"""Every test in these folders is `slow` (multi-process, whole pipeline), new ones included."""

SHARES_RAY_FOLDERS = ("stages",)
"""Every test module in these folders is `shares_ray`, new ones included."""

SHARE_RAY_ENV = "LMFORGE_TEST_SHARED_RAY"
"""`0`: every module starts Ray for itself, `shares_ray` or not (to measure what sharing saves)."""


NODE_WIDE = (
    # several Ray nodes started on this machine (network namespaces, fixed subnets)
    "tests/integration/test_cluster_submit.py",
    "tests/integration/test_bucket_store_private_nodes.py",
    "tests/integration/test_multinode_pretrain.py",
    "tests/integration/test_clean_node_join.py",
    # the node-local staging of checkpoints under a bucket URI that another of them also uses
    "tests/integration/test_remote_checkpoints.py",
    "tests/integration/test_bucket_shards.py",
)
"""Test files that use what the whole machine shares: `make test`'s parallel workers run them on
one worker, one at a time."""

NODE_WIDE_GROUP = "node-wide"
"""The one test group of all of `NODE_WIDE`."""

LONGEST_FIRST = ("tests/fault/test_resume_matrix.py", "tests/integration/test_tiny_pipeline.py")
"""The longest files outside `NODE_WIDE`: a parallel run starts them first, so that none is left
running alone at the end."""


def test_group(nodeid: str) -> str:
    """What one parallel worker runs as a whole: the test's file (its module fixtures, one
    demo-size run or one local Ray, are made once), or all of `NODE_WIDE`."""
    path = nodeid.split("::", 1)[0]
    return NODE_WIDE_GROUP if path in NODE_WIDE else path


def _start_rank(unit: str, slow: bool) -> int:
    """Where a test group starts: `NODE_WIDE`, `LONGEST_FIRST`, other slow files, the rest."""
    if unit == NODE_WIDE_GROUP:
        return 0
    if unit in LONGEST_FIRST:
        return 1
    return 2 if slow else 3


def _order(start: int, shares: bool) -> tuple[int, int]:
    """A test group's place: by `_start_rank`, but every `shares_ray` file, slow or not, in one
    stretch after `LONGEST_FIRST` (whose sharing file goes last), so that each worker runs a
    stretch of them on one Ray runtime."""
    if start <= 1:
        return start, int(shares)
    return (2, 0) if shares else (start, 1)


class TestGroups:
    """`pytest -n N` (`make test`) hands out `test_group`s, in the collection's order."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        from xdist.scheduler import LoadScopeScheduling

        class TestGroupScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return test_group(nodeid)

        return TestGroupScheduling(config, log)


def pytest_configure(config):
    register_cpu_by_test(config)  # only with LMFORGE_CPU_BY_TEST set
    if config.pluginmanager.hasplugin("xdist"):  # its hook is unknown without it
        config.pluginmanager.register(TestGroups(), "lmforge-test-groups")


def pytest_collection_modifyitems(config, items):
    """Mark `slow` the tests under tests/integration and tests/fault and every `integration`
    test: `make check` leaves them out (`pytest -m "not slow"`); `make test` runs everything.

    The order: `NODE_WIDE`, then `LONGEST_FIRST`, the other slow files, the rest; parallel
    workers take the test groups in this order (`--no-loadscope-reorder`), with the `shares_ray`
    files one after another (`_order`)."""
    record_collected(config, items)  # before `-m` and `-k` deselect: the suite's ids
    rank: dict[str, tuple[int, int]] = {}  # per test group: a file's tests stay together
    for item in items:
        if _folder(item) in SLOW_FOLDERS or (item.get_closest_marker("integration")):
            item.add_marker(pytest.mark.slow)
        unit = test_group(item.nodeid)
        first = _order(
            _start_rank(unit, item.get_closest_marker("slow") is not None), shares_ray(item)
        )
        rank[unit] = min(rank.get(unit, first), first)
    items.sort(key=lambda item: rank[test_group(item.nodeid)])  # stable within a rank


def _folder(node: pytest.Item | pytest.Module) -> str:
    """The folder under tests/ that a test or test module is in."""
    return node.path.resolve().relative_to(TESTS).parts[0]


def shares_ray(node: pytest.Item | pytest.Module) -> bool:
    """Whether a test module (or a test's) runs on the Ray runtime kept from the module before
    it (`cli_runner`)."""
    if os.environ.get(SHARE_RAY_ENV) == "0":
        return False
    return _folder(node) in SHARES_RAY_FOLDERS or node.get_closest_marker("shares_ray") is not None


@pytest.fixture(scope="module", autouse=True)
def ray_between_modules(request):
    """This process's Ray runtime: kept for a `shares_ray` module, shut down before any other
    (which starts its own where it needs one, as each `lmforge` process does)."""
    cli_runner.sharing_ray = shares_ray(request.node)
    if not cli_runner.sharing_ray:
        stop_ray()
    yield


@pytest.fixture(scope="session", autouse=True)
def ray_at_the_end():
    yield
    stop_ray()


@pytest.fixture
def workdir(tmp_path):
    path = tmp_path / "runs"
    path.mkdir()
    return path


@contextlib.contextmanager
def s3_server():
    """A real S3-compatible server (moto, counting what it serves: `counting_s3`) on 127.0.0.1
    with a bucket `lmforge`: (env, client)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = Path(__file__).parent / "counting_s3.py"
    proc = subprocess.Popen(
        [sys.executable, str(server), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        deadline = time.time() + 30
        while True:
            try:
                client.create_bucket(Bucket="lmforge")
                break
            except Exception:  # the server is still starting
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        yield env, client
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def s3(s3_module):
    """The module's S3 server as a fresh one for the test: its bucket emptied and the bytes it
    served (`counting_s3.served`) zeroed first. A server's start is about a CPU-second, and a
    module's tests either all use this or all keep to prefixes of their own (`s3_module`)."""
    env, client = s3_module
    for page in client.get_paginator("list_objects_v2").paginate(Bucket="lmforge"):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket="lmforge", Delete={"Objects": keys})
    reset(env)
    return s3_module


@pytest.fixture
def s3_in_env(s3, monkeypatch):
    """`s3`, with its address and keys in this process's environment: the S3 client."""
    env, client = s3
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return client


@pytest.fixture(scope="module")
def s3_module():
    """One S3 server for a module's tests, which keep to prefixes of their own."""
    with s3_server() as server:
        yield server


@pytest.fixture
def s3_env(s3_module, monkeypatch):
    """The module's S3 server with its credentials in this test's environment: (env, client)."""
    env, client = s3_module
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env, client


@pytest.fixture
def mlflow_server(tmp_path):
    """A real `mlflow server` on 127.0.0.1 (sqlite store) for the test: its URL."""
    with running_mlflow_server(tmp_path) as url:
        yield url
