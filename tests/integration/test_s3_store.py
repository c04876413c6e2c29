"""The `tiny` pipeline with its artifact store in a bucket of a real S3-compatible server (moto)
on 127.0.0.1: every artifact is published with its manifest, a rerun is all cache hits, a
changed training setting reruns pretrain and its descendants only (resuming from the bucket's
checkpoint on a node without a local cache, where the schedule lets a longer run continue a
shorter one), and a missing bucket is one clear error.

The runs call the CLI in this process (`main(argv)`), on one Ray runtime, on the 40-document
corpus: the store is the point, not the data nor a process boundary. The longer run's training
ranks are new processes, as every run's are, that find no local copy of anything: as on a fresh
node.

The store is under a prefix of this session's own: the node-local staging of a bucket's
checkpoints is keyed by their URI, which another session on this machine would share."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest
from cli_runner import SHORT_TINY, in_process_ray, lmforge_here, small_corpus, status

from lmforge.pipeline.training.checkpoint.bucket import local_staging

pytestmark = pytest.mark.integration


def test_tiny_pipeline_with_its_store_in_a_bucket(s3_in_env, workdir):
    client = s3_in_env
    store = f"{uuid.uuid4().hex[:12]}/store"
    # A constant rate after warmup (min_lr = the tiny preset's lr): raising max_steps then
    # continues the run's trajectory, so the longer run below resumes from its checkpoint. The
    # preset's sequence-level phase runs on a run's last steps, which a longer run moves, so it is
    # off here (with it on, max_steps is part of pretrain's key: no checkpoint to resume from).
    continuable = ["train.min_lr=3.0e-3", "train.sequence_unlikelihood=0"]
    # The 40 documents make 462 training windows: the sample index's one pass covers the 20 x 16
    # windows of the first run and the 25 x 16 of the longer one (30 steps would need another
    # pass: sample_index would rerun too, larger, under the same key).
    # One training rank: two resuming from the bucket are tests/fault/test_resume_matrix.py's.
    args = [
        "run", f"workdir={workdir}", f"cluster.store_uri=s3://lmforge/{store}", *SHORT_TINY,
        *small_corpus(workdir.parent), *continuable, "train.num_workers=1",
    ]  # fmt: skip
    with in_process_ray():
        lmforge_here(*args)
        states = status(workdir)
        assert {s["state"] for s in states.values()} == {"ran"}
        keys = {o["Key"] for o in client.list_objects_v2(Bucket="lmforge")["Contents"]}
        for name, entry in states.items():
            assert entry["artifact"] == f"s3://lmforge/{store}/{name}/{entry['key']}"
            assert f"{store}/{name}/{entry['key']}/manifest.json" in keys
        assert not (workdir / "store").exists()
        checkpoints = _summary(client, states["pretrain"])["checkpoint_dir"]
        assert checkpoints.startswith(f"s3://lmforge/{store}/checkpoints/pretrain/")
        prefix = checkpoints.removeprefix("s3://lmforge/")
        assert f"{prefix}/step_000020/COMPLETE" in keys
        assert not list(workdir.rglob("step_*")) and not (workdir / "ray_storage").exists()
        lmforge_here(*args)
        assert {s["state"] for s in status(workdir).values()} == {"cached"}

        shutil.rmtree(workdir / "cache")  # as on a fresh node: only the bucket holds the run
        shutil.rmtree(local_staging(checkpoints))
        # Longer, in the stage's own task: it continues the Ray Train worker's checkpoint.
        longer = [a.replace("max_steps=20", "max_steps=25") for a in args]
        lmforge_here(*longer, "train.local_mode=true")
    entries = status(workdir)
    states = {name: s["state"] for name, s in entries.items()}
    ran = {name for name, state in states.items() if state == "ran"}
    assert ran == {"pretrain", "perplexity", "sample", "harm", "report"}, states
    assert {states[n] for n in states.keys() - ran} == {"cached"}, states
    pretrain = entries["pretrain"]
    assert _summary(client, pretrain)["resumed_from_step"] == 20
    assert _summary(client, pretrain)["steps"] == 25


def _summary(client, entry: dict) -> dict:
    key = entry["artifact"].removeprefix("s3://lmforge/") + "/manifest.json"
    return json.loads(client.get_object(Bucket="lmforge", Key=key)["Body"].read())["summary"]


def test_a_missing_bucket_is_one_clear_error(s3_in_env, workdir):
    # in this process: the one `lmforge` process of an unreachable service is the tracking
    # server's (tests/integration/test_tracking_server.py)
    called = lmforge_here(
        "run", f"workdir={workdir}", "cluster.store_uri=s3://no-such-bucket/store", check=False
    )
    assert called.returncode != 0
    assert "bucket 'no-such-bucket'" in called.stdout.strip().splitlines()[-1]
