"""The `tiny` pipeline with its artifact store in a bucket of a real S3-compatible server (moto)
on 127.0.0.1: every artifact is published with its manifest, a rerun is all cache hits, and a
missing bucket is one clear error."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import lmforge, status

pytestmark = pytest.mark.integration

SHORT = [
    "train.max_steps=20",
    "train.checkpoint_every=10",
    "eval.harm.num_prompts=4",
    "eval.harm.bias_samples=0",
    "eval.harm.pii_samples=4",
]


@pytest.fixture
def s3(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
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


def test_tiny_pipeline_with_its_store_in_a_bucket(s3, workdir):
    env, client = s3
    args = ["run", f"workdir={workdir}", "cluster.store_uri=s3://lmforge/store", *SHORT]
    lmforge(*args, env=env)
    states = status(workdir)
    assert {s["state"] for s in states.values()} == {"ran"}
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="lmforge")["Contents"]}
    for name, entry in states.items():
        assert entry["artifact"] == f"s3://lmforge/store/{name}/{entry['key']}"
        assert f"store/{name}/{entry['key']}/manifest.json" in keys
    assert not (workdir / "store").exists()
    lmforge(*args, env=env)
    assert {s["state"] for s in status(workdir).values()} == {"cached"}


def test_a_missing_bucket_is_one_clear_error(s3, workdir):
    env, _ = s3
    proc = lmforge(
        "run",
        f"workdir={workdir}",
        "cluster.store_uri=s3://no-such-bucket/store",
        env=env,
        check=False,
    )
    assert proc.returncode != 0
    assert "bucket 'no-such-bucket'" in proc.stdout.strip().splitlines()[-1]
