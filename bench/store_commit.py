"""What the commit of a large artifact reads: nothing of its data, when its writers described it.

A "task" writes `--gb` of seeded random bytes as `--files` files through `ctx.output`
(`ArtifactOutput`: size, sha256 and per-block sha256 computed while writing), then the store
commits the artifact from those entries. `rchar` of /proc/self/io counts the bytes this process
read around each step. The reference is the commit as it was before writers returned entries:
hashing every file of the artifact again (`describe_files`), measured on the same files.

    python bench/store_commit.py [--gb 2] [--files 8] [--store local|bucket] [--dir DIR]

`--store bucket` starts a local moto S3 server (it holds objects in memory: keep --gb small).
Last line: JSON with `artifact_bytes`, `commit_rchar_bytes`, `commit_s`, `rehash_rchar_bytes`,
`rehash_s`, `write_s`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lmforge.pipeline.cluster.process_stats import bytes_read
from lmforge.pipeline.storage.artifact_store import ArtifactStore, describe_files
from lmforge.pipeline.storage.bucket_artifact_store import RemoteArtifactStore
from lmforge.pipeline.storage.node_cache import CacheConfig

CHUNK = 8 << 20


def write_artifact(output, total: int, files: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    entries = []
    per_file = total // files
    for index in range(files):
        with output.open(f"shard-{index:05d}.bin") as handle:
            left = per_file
            while left:
                n = min(CHUNK, left)
                handle.write(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
                left -= n
        entries.append(handle.entry)
    return entries


@contextlib.contextmanager
def moto_bucket():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        AWS_DEFAULT_REGION="us-east-1",
    )
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        deadline = time.time() + 30
        while True:
            try:
                client.create_bucket(Bucket="bench")
                break
            except Exception:  # still starting
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        yield "s3://bench/store"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def measure(store, total: int, files: int) -> dict:
    tmp = store.begin("bench", "key")
    started = time.perf_counter()
    entries = write_artifact(store.output(tmp), total, files)
    write_s = time.perf_counter() - started
    size = sum(e["bytes"] for e in entries)
    before, started = bytes_read(), time.perf_counter()
    store.commit(tmp, "bench", "key", {"summary": {}}, entries)
    commit_s, commit_read = time.perf_counter() - started, bytes_read() - before
    return {
        "artifact_bytes": size,
        "write_s": round(write_s, 2),
        "commit_rchar_bytes": commit_read,
        "commit_s": round(commit_s, 3),
    }


def rehash(directory: Path) -> dict:
    """The reference: the commit's old hashing pass over every file of the artifact."""
    before, started = bytes_read(), time.perf_counter()
    describe_files(directory)
    return {
        "rehash_rchar_bytes": bytes_read() - before,
        "rehash_s": round(time.perf_counter() - started, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gb", type=float, default=2.0)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--store", choices=("local", "bucket"), default="local")
    parser.add_argument("--dir", type=Path, default=None, help="where the local store lives")
    args = parser.parse_args()
    total = int(args.gb * 2**30)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="store-commit-") as root:
        root = Path(root)
        if args.store == "local":
            result = measure(ArtifactStore(root / "store"), total, args.files)
            result.update(rehash(root / "store" / "bench" / "key"))
        else:
            with moto_bucket() as uri:
                cache = CacheConfig(str(root / "cache"), 1 << 40)
                result = measure(RemoteArtifactStore(uri, cache), total, args.files)
    print(json.dumps({"bench": "store_commit", "store": args.store, **result}))


if __name__ == "__main__":
    main()
