"""The pipeline with its store in a bucket (moto, counting the bytes it serves) on a Ray cluster
whose nodes share no working directory: the second node runs in its own mount namespace, where
the workdir (the stage's staging, clean's work mirror and the node cache) is a private, empty
tmpfs. Only the raw sources, the MLflow sqlite file (a tracking server in a real cluster) and the
code are on paths both nodes see; S3 credentials are in every node's environment.

- clean's and tokenize's tasks run on both nodes and write straight into the bucket;
- the two training workers, one per node, stream the token shards into their own node's cache;
- perplexity downloads of the validation token shards only the block it reads;
- a token shard corrupted in the bucket is detected, named, and its stage to rerun given.

The runs call the CLI in this process (`main(argv)`), whose driver attaches to the cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import ray
from cli_runner import RAY_WORKER_LINE, SHORT_TINY, in_process_ray, lmforge_here, status
from counting_s3 import served
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from lmforge.pipeline.cluster.ray_runtime import local_settings
from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize

pytestmark = pytest.mark.integration

BUCKET = "lmforge"
BLOCK_BYTES = 8 << 10
MAX_TOKENS = "eval.perplexity.max_tokens"
RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def _why_no_private_node() -> str | None:
    if os.getuid() != 0 or not shutil.which("unshare"):
        return "a private mount namespace needs root and `unshare`"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"`unshare -m` failed: {probe.stderr.strip()}"


@pytest.fixture
def private_node_cluster(tmp_path, s3, monkeypatch):
    """A head node (1 CPU) and a second node (1 CPU) that sees an empty tmpfs at the workdir,
    both with the bucket's credentials; yields (GCS address, workdir)."""
    reason = _why_no_private_node()
    if reason:
        pytest.skip(reason)
    # Inherited by both nodes' processes: the bucket's credentials, and the settings of the
    # pipeline's local runtime (no dashboard, nor the Ray Train helpers that only a cluster that
    # grows, shrinks or drains needs: tests/integration/test_cluster_submit.py's cluster has them)
    for name, value in {**local_settings(), **s3[0]}.items():
        monkeypatch.setenv(name, value)
    workdir = tmp_path / "runs"
    workdir.mkdir()
    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    join = (
        f"mount -t tmpfs -o size=2g lmforge-private-node '{workdir}' && exec '{RAY}' start "
        f"--address={head.address} --num-cpus=1 --num-gpus=0 --block --disable-usage-stats"
    )
    log = open(tmp_path / "private-node.log", "wb")  # noqa: SIM115 (closed below)

    def start_node() -> subprocess.Popen:
        return subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", join],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    node = start_node()
    try:
        ray.init(address=head.address)
        deadline, attempts = time.time() + 120, 1
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if node.poll() is not None and attempts < 2:
                # `ray start` gives its raylet 30 s (hard-coded) to register with the GCS, which
                # a two-core machine busy with the other test worker's training can exceed
                # ("The current node timed out during startup"): a new namespace, once more
                node, attempts, deadline = start_node(), attempts + 1, time.time() + 120
            assert node.poll() is None and time.time() < deadline, "the private node did not join"
            time.sleep(0.5)
        yield head.address, workdir
    finally:
        ray.shutdown()
        with contextlib.suppress(ProcessLookupError):  # a node that failed has no group left
            os.killpg(node.pid, signal.SIGTERM)
        node.wait(timeout=60)
        log.close()
        head.shutdown()


def _what_each_node_sees(path: str) -> set[bool]:
    seen = set()
    for node in (n for n in ray.nodes() if n["Alive"]):
        strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        task = ray.remote(os.path.exists).options(num_cpus=0, scheduling_strategy=strategy)
        seen.add(ray.get(task.remote(path)))
    return seen


def _object(client, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def _manifest(client, artifact: str) -> dict:
    return json.loads(_object(client, artifact.removeprefix(f"s3://{BUCKET}/") + "/manifest.json"))


def _file_key(artifact: str, manifest: dict, rel: str) -> str:
    return f"{artifact.removeprefix(f's3://{BUCKET}/')}/{manifest['data_prefix']}/{rel}"


@pytest.fixture
def driver_here(private_node_cluster):
    """The pipeline's driver in this process, detached from the cluster after the test."""
    with in_process_ray():
        yield


def test_nodes_sharing_only_the_bucket_run_the_pipeline(
    private_node_cluster, s3, tmp_path, driver_here
):
    address, workdir = private_node_cluster
    env, client = s3
    (workdir / "only-on-the-head").write_text("")
    assert _what_each_node_sees(str(workdir / "only-on-the-head")) == {True, False}
    ray.shutdown()  # the pipeline's own driver attaches below
    corpus = tmp_path / "corpus"  # raw sources: the one path both nodes read
    synthesize(corpus, docs=4000, files=4, seed=7)
    args = [
        f"workdir={workdir}",
        "cluster.store_uri=s3://lmforge/store",
        f"cluster.ray_address={address}",
        f"cluster.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"cluster.store_block_mb={BLOCK_BYTES / 2**20}",
        f"data.paths=[{corpus}/*.jsonl.zst]",
        "data.read_split_mb=0.001",  # a read unit per file: tasks on both nodes
        "data.shard_mb=0.03",  # several clean shards per split,
        "tokenizer.shard_mb=0",  # and a token shard for each
        "train.placement_strategy=STRICT_SPREAD",  # one training worker on each node
        *[a for a in SHORT_TINY if a.split("=")[0] not in ("train.max_steps", MAX_TOKENS)],
        "train.max_steps=10",
        f"{MAX_TOKENS}=1024",
    ]
    lmforge_here("run", "--until", "perplexity", *args)
    states = status(workdir)
    summaries = {name: _manifest(client, s["artifact"])["summary"] for name, s in states.items()}
    assert summaries["clean"]["read_nodes"] == 2
    assert summaries["tokenize"]["nodes"] == 2
    pretrain = states["pretrain"]["artifact"]
    training = json.loads(
        _object(client, _file_key(pretrain, _manifest(client, pretrain), "training_summary.json"))
    )
    assert len(set(training["worker_nodes"])) == 2
    assert training["final_loss"] < training["initial_loss"]

    # Only perplexity reads the validation token shards, and 1024 tokens of them at most.
    got = served(env)
    tokenize = states["tokenize"]["artifact"]
    manifest = _manifest(client, tokenize)
    sizes = {f["path"]: f["bytes"] for f in manifest["files"]}
    val_tokens = sorted(p for p in sizes if p.startswith("val-") and p.endswith(".tokens.bin"))
    assert len(val_tokens) >= 2 and sizes[val_tokens[0]] > 2 * BLOCK_BYTES
    fetched = {rel: got.get(f"{BUCKET}/{_file_key(tokenize, manifest, rel)}", 0) for rel in sizes}
    # 2 KB of tokens: their block only, once on each node whose scoring actor reads some of them.
    assert 0 < fetched[val_tokens[0]] <= 2 * BLOCK_BYTES < sizes[val_tokens[0]]
    assert all(fetched[rel] == 0 for rel in val_tokens[1:])
    clean = states["clean"]["artifact"]
    clean_manifest = _manifest(client, clean)
    unread = [e["path"] for e in clean_manifest["files"] if "excluded" in e["path"]]
    assert unread and all(
        got.get(f"{BUCKET}/{_file_key(clean, clean_manifest, rel)}", 0) == 0 for rel in unread
    )

    corrupt = _file_key(tokenize, manifest, val_tokens[0])
    body = bytearray(_object(client, corrupt))
    body[10] ^= 1
    client.put_object(Bucket=BUCKET, Key=corrupt, Body=bytes(body))
    fresh = f"cluster.cache.dir={workdir}/fresh-cache"  # as on a node that read nothing yet
    # perplexity again (another slice: a new key), and no other evaluation stage
    again = [a.replace(f"{MAX_TOKENS}=1024", f"{MAX_TOKENS}=512") for a in args] + [fresh]
    proc = lmforge_here("run", "--until", "perplexity", *again, check=False)
    assert proc.returncode != 0
    said = [line for line in proc.stdout.strip().splitlines() if not RAY_WORKER_LINE.match(line)]
    last = said[-1]
    assert f"{tokenize}/{val_tokens[0]} does not match its sha256" in last, proc.stdout[-3000:]
    assert "lmforge rerun tokenize" in last
