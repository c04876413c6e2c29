"""Two `lmforge run`s started together over one store (one workdir; two workdirs on one store
path; two workdirs on one bucket): both succeed, each stage is computed by exactly one of them
and taken from the cache by the other, a `run --verify` afterwards is all cache hits, and nothing
is set aside in `.replaced/`, nor left as a temporary or a lease. And a run whose driver was
killed holding `clean`'s lease: the next run takes the lease over once it expires and resumes
the finished tasks.

On the 40-document corpus and the small model, up to `tokenize`: the stages that run side by
side in the two runs are the point, not what they compute. The two runs started together attach
to one Ray runtime of the module's (`ray_head`), as two users' runs on one cluster, instead of
each starting and stopping a local one."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import (
    LMFORGE,
    SMALL_MODEL,
    in_process_ray,
    kill_once,
    lmforge_here,
    settled_count,
    small_corpus,
    status,
)
from ray.cluster_utils import Cluster

from lmforge.pipeline.cluster.ray_runtime import TOKEN_FILE
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.run_request import RunRequest, plan_for
from lmforge.pipeline.engine.tracking import resolve_tracking_uri
from lmforge.pipeline.storage.leases.lease import Lease, Leases, lease_name
from lmforge.pipeline.storage.leases.lease_files import LocalLeaseFiles

pytestmark = pytest.mark.integration

STAGES = ("clean", "train_tokenizer", "tokenize")
LEFTOVERS = (".replaced", ".tmp-*", "*.lease.json", "*.partial-*", ".lease-probe-*")
"""What no run leaves in a store once it ended well (set-aside copies, temporaries, leases)."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[str]:
    return small_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def ray_head(s3_module) -> Iterator[str]:
    """A Ray runtime (2 CPUs) for the module's runs that start together: the override that
    attaches a run to it. Its workers have the module's S3 server's credentials in their
    environment, as a cluster's nodes have the bucket's."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in s3_module[0].items():
            env.setenv(name, value)
        head = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 2, "include_dashboard": False},
        )
    try:
        yield f"cluster.ray_address={head.address}"
    finally:
        head.shutdown()


def pipeline(corpus: list[str], workdir: Path, *more: str, until: str = "tokenize") -> list[str]:
    return [
        "run", "--until", until, "preset=tiny", *SMALL_MODEL, *corpus, f"workdir={workdir}", *more,
    ]  # fmt: skip


def together(*commands: list[str], env: dict | None = None) -> list[str]:
    """Start every `lmforge` command at once; what each printed, once all exited 0."""
    procs = [
        subprocess.Popen(
            [*LMFORGE, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        for args in commands
    ]
    outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    for proc, output in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, output
    return outputs


def table_states(output: str) -> dict[str, str]:
    """Each stage's state in the status table a run printed at its end."""
    lines = output.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("stage "))
    states = {}
    for line in lines[start + 1 :]:
        row = line.split()
        if not row or row[0] not in STAGES:
            return states
        states[row[0]] = row[2]
    return states


def assert_each_stage_ran_once(outputs: list[str]) -> None:
    tables = [table_states(output) for output in outputs]
    for stage in STAGES:
        assert sorted(t[stage] for t in tables) == ["cached", "ran"], (stage, tables)
    waited = "".join(outputs)
    assert " waiting  for run " in waited, "the run that waited said for whom"


def assert_all_cached(caplog, workdir: Path, *more: str) -> None:
    """`run --verify` (in this process: no stage to run, no Ray) finds every stage cached,
    intact, without a warning."""
    with caplog.at_level(logging.WARNING, logger="lmforge"):
        lmforge_here("run", "--verify", *more)
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert {s["state"] for s in status(workdir).values()} == {"cached"}


def assert_nothing_left(store: Path) -> None:
    left = sorted(str(p) for pattern in LEFTOVERS for p in store.rglob(pattern))
    assert not left, left


def test_two_runs_in_one_workdir(tmp_path, corpus, caplog, ray_head):
    workdir = tmp_path / "runs"
    # The MLflow store made beforehand: this test is about the stages' leases; two runs that
    # both create a workdir's sqlite store is a matter of tracking's own.
    from mlflow.tracking import MlflowClient

    MlflowClient(resolve_tracking_uri(workdir, None)).search_experiments()
    args = pipeline(corpus, workdir, ray_head)
    assert_each_stage_ran_once(together(args, args))
    assert_all_cached(caplog, workdir, *pipeline(corpus, workdir)[1:])
    assert_nothing_left(workdir / "store")


def test_two_workdirs_on_one_store_path(tmp_path, corpus, caplog, ray_head):
    store = tmp_path / "shared-store"
    first, second = (
        pipeline(corpus, tmp_path / n, f"cluster.store_uri={store}", ray_head) for n in "ab"
    )
    assert_each_stage_ran_once(together(first, second))
    assert_all_cached(caplog, tmp_path / "a", *first[1:])
    assert_nothing_left(store)
    assert not (tmp_path / "a" / "store").exists() and not (tmp_path / "b" / "store").exists()


def test_two_workdirs_on_one_bucket(tmp_path, corpus, s3_env, caplog, ray_head):
    env, client = s3_env
    prefix = f"{uuid.uuid4().hex[:12]}/store"
    uri = f"cluster.store_uri=s3://lmforge/{prefix}"
    first, second = (pipeline(corpus, tmp_path / n, uri, ray_head) for n in "ab")
    assert_each_stage_ran_once(together(first, second, env=env))
    assert_all_cached(caplog, tmp_path / "b", *second[1:])
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="lmforge", Prefix=prefix)["Contents"]]
    for stage in STAGES:
        assert sum(
            k.startswith(f"{prefix}/{stage}/") and k.endswith("/manifest.json") for k in keys
        )
    left = [k for k in keys if "/.replaced/" in k or ".lease" in k]
    assert not left, left
    for workdir in (tmp_path / "a", tmp_path / "b"):
        assert not list((workdir / "cache" / "staging").glob("*/*")), "staging left behind"


def test_a_killed_holders_lease_is_taken_over_once_expired_and_its_tasks_resumed(
    tmp_path, corpus, caplog
):
    workdir = tmp_path / "runs"
    units = ["data.read_split_mb=0.02"]  # the corpus in about ten read units, a task each
    killed = subprocess.Popen(
        [*LMFORGE, *pipeline(corpus, workdir, *units, until="clean")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    markers = workdir / "resume" / "clean"
    kill_once(killed, markers, "*/done/filter-*.json")
    finished = settled_count(markers, "*/done/filter-*.json")
    (lease,) = (workdir / "store" / "clean").glob("*.lease.json")
    # As a holder on another node would look (its pid means nothing here): only the lease's
    # expiry, on this run's own clock, lets the next run in.
    record = json.loads(lease.read_text())
    lease.write_text(json.dumps(dict(record, host="another-node")))

    short = ["cluster.lease_renew_s=0.5", "cluster.lease_expiry_s=3"]
    # The next run in this process: what it says of the lease is logged here, by its driver.
    with in_process_ray(), caplog.at_level(logging.INFO, logger="lmforge"):
        lmforge_here(*pipeline(corpus, workdir, *units, *short, until="clean"))
    said = caplog.text
    assert "waiting  for run" in said and "on host another-node" in said, said
    assert "took over the lease" in said and "it was not renewed" in said, said
    clean = json.loads((Path(status(workdir)["clean"]["artifact"]) / "manifest.json").read_text())
    assert 1 <= clean["summary"]["units_resumed"] == finished < clean["summary"]["read_units"]
    assert_nothing_left(workdir / "store")


def test_a_stage_a_live_run_holds_is_waited_for_until_its_artifact_appears(tmp_path, corpus):
    """Past `--lease-wait`: one line naming the holder. Without a limit: the run waits, `status`
    names the holder, and the artifact is a cache hit once committed, before the holder lets go
    of the lease. Neither run starts Ray: all they were to run was another run's."""
    workdir = tmp_path / "runs"
    args = pipeline(corpus, workdir, until="clean")
    key = plan_for(RunRequest(compose(args[3:])))[1].stages["clean"].key
    files = LocalLeaseFiles(workdir / "store")
    holder = Leases(files, run="the-other-run")
    assert isinstance(holder.acquire(lease_name("clean", key)), Lease)  # this live process
    try:
        with in_process_ray():
            failed = lmforge_here(*args, "--lease-wait", "2", check=False)
            # The holder's artifact, made in a store of its own and committed here by a rename
            # (as its commit would be), while this process still holds the lease.
            made = tmp_path / "holders-store"
            lmforge_here(
                *pipeline(corpus, tmp_path / "holder", f"cluster.store_uri={made}", until="clean")
            )
        assert failed.returncode != 0
        errors = [line for line in failed.stdout.splitlines() if line.startswith("lmforge:")]
        assert len(errors) == 1 and errors[0].startswith("lmforge: error:"), failed.stdout
        assert "stage 'clean'" in errors[0] and "run the-other-run" in errors[0]
        assert f"(pid {os.getpid()})" in errors[0] and "--lease-wait 2s" in errors[0]
        assert status(workdir)["clean"]["state"] == "failed"

        waiting = subprocess.Popen(
            [*LMFORGE, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.time() + 300
        while (status(workdir)["clean"].get("holder") or {}).get("run") != "the-other-run":
            assert waiting.poll() is None, waiting.stdout.read()
            assert time.time() < deadline, "the run never showed whom it waits for"
            time.sleep(0.2)
        assert status(workdir)["clean"]["holder"]["pid"] == os.getpid()
        os.rename(made / "clean" / key, workdir / "store" / "clean" / key)
        output = waiting.communicate(timeout=300)[0]
        assert waiting.returncode == 0, output
        assert table_states(output) == {"clean": "cached"}
        assert files.read(lease_name("clean", key)) is not None, "the holder still held it"
        # Another run held all that either run was to compute: neither started Ray for it.
        assert not (workdir / TOKEN_FILE).exists(), "a Ray runtime was started for nothing"
    finally:
        holder.close()
    assert_nothing_left(workdir / "store")
