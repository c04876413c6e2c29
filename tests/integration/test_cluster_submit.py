"""A real multi-node Ray cluster on this machine (`infra/local/netns_cluster.sh`: a head and two
worker nodes, each worker in its own network namespace when root), with token authentication.
Where network namespaces are unavailable (or NETNS=off), the workers share 127.0.0.1 and the
check of separate node addresses is skipped, with its reason in the summary (`pytest -rs`).

`lmforge submit` runs the pipeline there as a Ray Job: its stages land on more than one node and
MLflow holds the whole lineage; `jobs`, `logs`, `stop` and `run --ray-address` work against it;
a wrong or missing token is one clear line.

`submit`, `jobs` and `logs` call the CLI in this process (`main(argv)`): they only speak to the
Jobs API. Ray's state API is read through one process of its own for the module (`StateReader`).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runner import SHORT_TINY, in_process_ray, lmforge, lmforge_here, small_corpus, status
from integration.ray_state_reader import StateReader

from lmforge.pipeline.engine.tracking import client

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "infra" / "local" / "netns_cluster.sh"
RAY = Path(sys.executable).parent / "ray"


@dataclass
class Cluster:
    address: str  # Jobs API, http://127.0.0.1:PORT
    gcs: str  # HOST:PORT
    client_port: int
    env: dict[str, str]  # what a client of this cluster needs (token path, auth mode)
    netns: bool  # each worker node in its own network namespace, with its own address
    why_not_netns: str
    state: Path  # the script's state: token, logs, the head's Ray session
    reader: StateReader  # Ray's state API

    def ray_client_crashes(self) -> int:
        """How often Ray Client's proxy lost a server to gRPC's fork race (ray#63202)."""
        logs = self.state.glob("tmp/head/session_*/logs/ray_client_server*.err")
        return sum(
            log.read_text(errors="replace").count("next_worker->state == KICKED") for log in logs
        )


def _free_ports(count: int) -> list[int]:
    """Distinct free ports outside 10002-19999, the range Ray gives its workers."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if not 10002 <= port <= 19999 and port not in ports:
            ports.append(port)
    return ports


def _network_namespaces() -> tuple[bool, str]:
    """Whether worker nodes get their own network namespace, and why not (NETNS=on|off|auto)."""
    wanted = os.environ.get("NETNS", "auto")
    if wanted in ("on", "off"):
        return wanted == "on", "NETNS=off"
    if os.getuid() != 0 or not shutil.which("ip"):
        return False, "not root, or no `ip` command"
    probe = f"lmf-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return made.returncode == 0, f"`ip netns add` failed: {made.stderr.strip()}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    netns, why_not = _network_namespaces()
    state = Path(tempfile.mkdtemp(prefix="lmfc-", dir="/tmp"))  # short: Ray's socket paths
    names = ("GCS", "DASHBOARD", "CLIENT", "RUNTIME_ENV", "AGENT")
    ports = dict(zip(names, _free_ports(len(names)), strict=True))
    reader = None
    env = {
        **os.environ,
        "LMFORGE_CLUSTER_DIR": str(state),
        "RAY": str(RAY),
        "WORKERS": "2",
        "WORKER_CPUS": "1",
        "HEAD_CPUS": "0",
        "SUBNET": f"10.213.{random.randint(100, 250)}",
        "NETNS": "on" if netns else "off",
        **{f"{name}_PORT": str(port) for name, port in ports.items()},
    }
    try:
        up = subprocess.run(
            ["bash", str(SCRIPT), "up"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=240,
        )
        assert up.returncode == 0, f"cluster did not start:\n{up.stdout}"
        assert ("network namespaces" in up.stdout) == netns, up.stdout
        exported = dict(
            re.findall(r"^export (\w+)=(.*)$", (state / "cluster.env").read_text(), re.M)
        )
        client_env = {k: exported[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")}
        reader = StateReader(exported["RAY_API_SERVER_ADDRESS"], client_env)
        yield Cluster(
            address=exported["RAY_API_SERVER_ADDRESS"],
            gcs=exported["RAY_ADDRESS"],
            client_port=ports["CLIENT"],
            env=client_env,
            netns=netns,
            why_not_netns=why_not,
            state=state,
            reader=reader,
        )
    finally:
        if reader is not None:
            reader.close()
        subprocess.run(["bash", str(SCRIPT), "down"], env=env, timeout=120, check=False)
        kept = tmp_path_factory.mktemp("cluster-logs")  # pytest keeps its last three runs
        for log in [*state.glob("logs/*.log"), *state.glob("tmp/head/session_*/logs/*.err")]:
            shutil.copy(log, kept / log.name)
        shutil.rmtree(state, ignore_errors=True)


def _state_api(cluster: Cluster, what: str, filters: list | None = None) -> list[dict]:
    """Nodes, jobs or tasks from Ray's state API (those matching `filters`)."""
    return cluster.reader.read(what, filters)


@dataclass
class Submitted:
    workdir: Path
    job: str  # its submission id
    output: str  # what `lmforge submit` printed while it waited
    secret: str  # given as `+cluster.api_token`


def _submitted_job_id(output: str) -> str:
    match = re.search(r"^submitted job (\S+) to ", output, re.M)
    assert match, output
    return match.group(1)


def _ray_job_id(cluster: Cluster, submission_id: str) -> str:
    jobs = _state_api(cluster, "jobs")
    return next(j["job_id"] for j in jobs if j["submission_id"] == submission_id)


UNTIL = "perplexity"
ALL = ("clean", "train_tokenizer", "tokenize", "sample_index", "pretrain", "perplexity")
"""What the submitted job runs (`--until perplexity`): the stages whose work spreads over the
nodes (clean's shard tasks, pretrain's two ranks) and an eval stage downstream of the model,
each with its lineage. The eval stages after it run as perplexity does (one stage task each)."""


@pytest.fixture(scope="module")
def submitted(cluster, tmp_path_factory) -> Submitted:
    """The pipeline submitted as a Ray Job and followed to its end: `lmforge submit` waits.

    A secret override goes with it: it reaches the job's driver through its environment, and
    neither the job's listing, logs, entrypoint nor metadata holds it. 40 documents here and in
    the runs below: what is checked is where the work runs and what MLflow records, not the
    data (the demo-size run cleans the whole embedded corpus)."""
    root = tmp_path_factory.mktemp("submitted")
    workdir = root / "runs"
    secret = "s3cret" + uuid.uuid4().hex[:8]
    with pytest.MonkeyPatch.context() as env:
        for name, value in cluster.env.items():
            env.setenv(name, value)
        proc = lmforge_here(
            "submit",
            "--address",
            cluster.address,
            "--until",
            UNTIL,
            *SHORT_TINY,
            *small_corpus(root),
            f"workdir={workdir}",
            f"+cluster.api_token={secret}",
        )
    return Submitted(workdir, _submitted_job_id(proc.stdout), proc.stdout, secret)


def test_submitted_pipeline_runs_stages_on_several_nodes_with_complete_lineage(cluster, submitted):
    workdir, job = submitted.workdir, submitted.job
    assert f"job {job} SUCCEEDED" in submitted.output

    states = status(workdir)
    assert {s: e["state"] for s, e in states.items()} == dict.fromkeys(ALL, "ran")
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    runs = {s: mlflow.get_run(e["mlflow_run_id"]) for s, e in states.items()}
    parent_ids = {r.data.tags["mlflow.parentRunId"] for r in runs.values()}
    assert len(parent_ids) == 1
    parent = mlflow.get_run(parent_ids.pop())
    assert parent.info.status == "FINISHED"
    children = mlflow.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
    )
    assert sorted(r.data.tags["lmforge.stage"] for r in children) == sorted(ALL)
    for stage, run in runs.items():
        assert run.info.status == "FINISHED"
        assert run.data.tags["lmforge.cache_key"] == states[stage]["key"]
    for stage, upstreams in {
        "tokenize": ("clean", "train_tokenizer"),
        "sample_index": ("tokenize",),
        "pretrain": ("tokenize", "sample_index", "train_tokenizer"),
        "perplexity": ("pretrain",),
    }.items():
        tags = runs[stage].data.tags
        for upstream in upstreams:
            assert f"{upstream}={states[upstream]['key']}" in tags["lmforge.inputs"]
            assert f"{upstream}={runs[upstream].info.run_id}" in tags["lmforge.input_runs"]
    assert "loss" in runs["pretrain"].data.metrics

    ray_job = _ray_job_id(cluster, job)
    tasks = [t for t in _state_api(cluster, "tasks") if t["job_id"] == ray_job]
    stage_tasks = {t["name"]: t for t in tasks if t["name"].startswith("stage:")}
    assert set(stage_tasks) == {f"stage:{name}" for name in ALL}
    assert all(t["state"] == "FINISHED" for t in stage_tasks.values())
    work = [t for t in tasks if t["type"] == "NORMAL_TASK"]  # stages and their shard tasks
    used_nodes = {t["node_id"] for t in work}
    assert len(used_nodes) >= 2, f"all stage work ran on one node: {work}"
    nodes = _state_api(cluster, "nodes")
    assert len([n for n in nodes if n["state"] == "ALIVE"]) == 3
    # the two training workers need a CPU each and each node has one: gloo spans two nodes
    manifest = json.loads((Path(states["pretrain"]["artifact"]) / "manifest.json").read_text())
    assert manifest["summary"]["world_size"] == 2
    training = json.loads(
        (Path(states["pretrain"]["artifact"]) / "training_summary.json").read_text()
    )
    assert len(set(training["worker_nodes"])) == 2


def test_each_node_has_its_own_network_address(cluster):
    if not cluster.netns:
        pytest.skip(
            f"network namespaces unavailable ({cluster.why_not_netns}): the worker nodes share "
            "127.0.0.1, so their separate addresses are not checked"
        )
    nodes = [n for n in _state_api(cluster, "nodes") if n["state"] == "ALIVE"]
    assert len({n["node_ip"] for n in nodes}) == len(nodes) == 3


def test_jobs_and_logs_show_a_submitted_pipeline(cluster, submitted, monkeypatch):
    """The job's logs (followed to the end, and as they stand) and its line in the listing; the
    secret override is in none of them, nor in the job's entrypoint and metadata."""
    workdir, job, secret = submitted.workdir, submitted.job, submitted.secret
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    follow = lmforge_here("logs", job, "--follow", "--address", cluster.address)
    assert re.search(r"^clean\s+ran\b", follow.stdout, re.M), follow.stdout
    assert f"job {job} SUCCEEDED" in follow.stdout
    listing = lmforge_here("jobs", "--address", cluster.address).stdout
    row = next(line for line in listing.splitlines() if line.startswith(job))
    assert "SUCCEEDED" in row and str(workdir) in row and "lmforge run" in row
    info = next(j for j in _state_api(cluster, "jobs") if j["submission_id"] == job)
    shown = f"{info['entrypoint']} {json.dumps(info['metadata'])} {listing} {follow.stdout}"
    assert secret not in shown
    logs = lmforge_here("logs", job, "--address", cluster.address).stdout
    assert "pipeline run" in logs and "finished" in logs
    assert secret not in logs + submitted.output


def test_stop_ends_the_job_and_marks_its_pipeline_killed(cluster, tmp_path, monkeypatch):
    workdir = tmp_path / "runs"
    for name, value in cluster.env.items():
        monkeypatch.setenv(name, value)
    proc = lmforge_here("submit", "--no-wait", "--address", cluster.address, f"workdir={workdir}")
    job = _submitted_job_id(proc.stdout)
    records = workdir / "pipeline_runs"
    deadline = time.time() + 180
    while not any('"state": "running"' in p.read_text() for p in records.glob("*.json")):
        assert time.time() < deadline, "no stage started within 180 s"
        time.sleep(1)
    stop = lmforge_here("stop", job, "--address", cluster.address)
    assert f"job {job} STOPPED" in stop.stdout
    record = json.loads(next(records.glob("*.json")).read_text())
    assert record["state"] == "killed"
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    assert mlflow.get_run(record["mlflow_run_id"]).info.status == "KILLED"
    assert not [s for s in record["stages"] if s["state"] == "running"]


@pytest.mark.parametrize("address_of", ["auto", "ray_client"])
def test_run_attached_to_the_cluster_runs_its_work_on_worker_nodes(cluster, tmp_path, address_of):
    workdir = tmp_path / "runs"
    address = "auto" if address_of == "auto" else f"ray://127.0.0.1:{cluster.client_port}"
    env = {**cluster.env, "RAY_ADDRESS": cluster.gcs}
    jobs_before = {j["job_id"] for j in _state_api(cluster, "jobs")}
    corpus = small_corpus(tmp_path)
    args = ("run", "--until", "clean", "--ray-address", address, *corpus, f"workdir={workdir}")
    crashes = cluster.ray_client_crashes()
    proc = lmforge(*args, env=env, check=False)
    if proc.returncode != 0 and cluster.ray_client_crashes() > crashes:
        # Ray's client proxy sometimes dies forking the per-client server, a known upstream
        # race (ray-project/ray#63202) and not lmforge's; only that exact crash earns a retry.
        # The crashed driver's tasks died with it (WORKER_DIED, never retried): judge the retry.
        jobs_before = {j["job_id"] for j in _state_api(cluster, "jobs")}
        proc = lmforge(*args, env=env, check=False)
    assert proc.returncode == 0, proc.stdout
    assert status(workdir)["clean"]["state"] == "ran"
    workers = {n["node_id"] for n in _state_api(cluster, "nodes") if not n["is_head_node"]}
    # The run's own driver jobs: their tasks only, as the cluster's whole task list can pass the
    # state API's limit. Ray reports task events asynchronously (batched each second, per
    # process), so the last ones can arrive after the run exits: read for a few seconds.
    jobs = [j["job_id"] for j in _state_api(cluster, "jobs") if j["job_id"] not in jobs_before]
    assert jobs
    time.sleep(3)
    new = [t for j in jobs if j for t in _state_api(cluster, "tasks", [("job_id", "=", j)])]
    assert [t["state"] for t in new if t["name"] == "stage:clean"] == ["FINISHED"]
    cpu_tasks = [t for t in new if (t["required_resources"] or {}).get("CPU", 0) > 0]
    finished = [t for t in cpu_tasks if t["state"] == "FINISHED"]
    assert finished and {t["node_id"] for t in finished} <= workers  # the head has no CPUs
    # Every attempt that names its node names a worker node. An attempt may also show as FAILED
    # (WORKER_DIED) with or without a node: its worker was reaped before its last event was sent
    # (the owner had its result; the stage finished), or it died and Ray retried it.
    others = [(t["name"], t["state"], t.get("error_type"), t["node_id"]) for t in cpu_tasks]
    assert {t["node_id"] for t in cpu_tasks} - {None} <= workers, others


def test_a_wrong_or_missing_token_is_one_clear_line(cluster, tmp_path):
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    wrong = lmforge(
        "jobs", "--address", cluster.address, check=False, env={**base, "RAY_AUTH_TOKEN": "0" * 64}
    )
    missing_env = {**base, "HOME": str(tmp_path)}
    missing = subprocess.run(
        [sys.executable, "-m", "lmforge.pipeline.cli.main", "jobs", "--address", cluster.address],
        env=missing_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wrong.returncode == 1
    assert (
        wrong.stdout.strip()
        .splitlines()[-1]
        .startswith(f"lmforge: error: the Ray cluster at {cluster.address} rejected the token")
    )
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"lmforge: error: the Ray cluster at {cluster.address} requires a token: set "
        "RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH to the cluster's token"
    ]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_unreachable_ray_address_is_one_clear_line_within_a_minute(tmp_path, scheme):
    """A GCS address as a user's `lmforge` process meets it; a Ray Client address through the
    CLI in this process (`main(argv)`)."""
    address = f"{scheme}127.0.0.1:{_free_ports(1)[0]}"
    args = ("run", "--until", "clean", "--ray-address", address, f"workdir={tmp_path / 'runs'}")
    started = time.time()
    if scheme:
        with in_process_ray():
            proc = lmforge_here(*args, check=False)
    else:
        proc = lmforge(*args, check=False, timeout=120)
    assert proc.returncode == 1
    assert (
        proc.stdout.strip()
        .splitlines()[-1]
        .startswith(f"lmforge: error: cannot connect to Ray at {address}")
    )
    assert time.time() - started < 60
    # MLflow was set up while Ray was being reached: the pipeline's run is closed, not left open
    mlflow = client(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}")
    experiment = mlflow.get_experiment_by_name("lmforge")
    runs = mlflow.search_runs([experiment.experiment_id])
    assert [(r.info.run_name.split("-")[0], r.info.status) for r in runs] == [
        ("pipeline", "KILLED")
    ]
