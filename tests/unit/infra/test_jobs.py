"""`lmforge submit/jobs/logs/stop` without a cluster: what the job runs, what it ships, and the
errors that must come before anything reaches a cluster."""

from __future__ import annotations

import argparse
import shlex
import socket
import subprocess
import sys

import pytest

from lmforge.pipeline.cli.main import _parser, main
from lmforge.pipeline.cluster import job_payload
from lmforge.pipeline.cluster import ray_jobs as jobs
from lmforge.pipeline.errors import LmforgeError


def _submit_args(*argv: str) -> argparse.Namespace:
    return _parser().parse_args(["submit", *argv])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_job_entrypoint_is_a_valid_lmforge_run_attached_to_the_cluster():
    args = _submit_args("--until", "tokenize", "workdir=/shared/runs", "train.lr=0.01")
    command = shlex.split(job_payload.pipeline_entrypoint(args))
    assert command[:3] == ["python", "-m", "lmforge.pipeline.cli.main"]
    parsed = _parser().parse_args(command[3:])
    assert parsed.command == "run"
    assert parsed.until == "tokenize"
    assert parsed.ray_address == "auto"
    assert parsed.overrides == ["workdir=/shared/runs", "train.lr=0.01"]


def test_submit_rerun_becomes_lmforge_rerun_with_downstream():
    args = _submit_args("--rerun", "pretrain", "--downstream", "workdir=/shared/runs")
    parsed = _parser().parse_args(shlex.split(job_payload.pipeline_entrypoint(args))[3:])
    assert (parsed.command, parsed.stage, parsed.downstream) == ("rerun", "pretrain", True)
    assert parsed.ray_address == "auto"


def test_downstream_without_rerun_is_refused():
    with pytest.raises(LmforgeError, match="--rerun"):
        job_payload.pipeline_entrypoint(_submit_args("--downstream", "workdir=/shared/runs"))


def test_overrides_with_spaces_survive_the_shell():
    args = _submit_args("workdir=/shared/my runs")
    parsed = _parser().parse_args(shlex.split(job_payload.pipeline_entrypoint(args))[3:])
    assert parsed.overrides == ["workdir=/shared/my runs"]


def test_the_shipped_working_dir_imports_as_lmforge_and_holds_no_bulk(tmp_path):
    staged = jobs.stage_project(tmp_path / "job")
    probe = (
        "import lmforge.pipeline.cli.main, lmforge.conf, lmforge.tokenizer, lmforge.model.gpt as g;"
        "print(lmforge.pipeline.cli.main.__file__); print(g.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=staged,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert all(path.startswith(str(staged)) for path in out), out
    assert (staged / "lmforge" / "conf" / "config.yaml").is_file()
    names = {p.name for p in staged.rglob("*")}
    assert not names & {".venv", "runs", ".git", "__pycache__"}
    total = sum(p.stat().st_size for p in staged.rglob("*") if p.is_file())
    assert total < 20 * 2**20  # far below the Jobs API's upload limit


def test_address_comes_from_flag_then_environment_then_loopback(monkeypatch):
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    assert jobs.jobs_address(None) == "http://127.0.0.1:8265"
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://head:8265/")
    assert jobs.jobs_address(None) == "http://head:8265"
    assert jobs.jobs_address("https://other:443") == "https://other:443"
    with pytest.raises(LmforgeError, match="not the GCS address"):
        jobs.jobs_address("head:6379")


def test_token_comes_from_environment_then_token_file(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    assert jobs.auth_headers() == {}
    token_file = tmp_path / "token"
    token_file.write_text("abc123\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token_file))
    assert jobs.auth_headers() == {"Authorization": "Bearer abc123"}
    monkeypatch.setenv("RAY_AUTH_TOKEN", "fromenv")
    assert jobs.auth_headers() == {"Authorization": "Bearer fromenv"}
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "missing"))
    with pytest.raises(LmforgeError, match="RAY_AUTH_TOKEN_PATH"):
        jobs.auth_headers()


def test_submit_with_a_relative_workdir_fails_before_contacting_a_cluster(capsys):
    code = main(["submit", "--address", "http://127.0.0.1:1", "workdir=runs"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and "workdir=/ABSOLUTE/PATH" in err[0]


def test_submit_to_an_unreachable_address_is_one_clear_line(tmp_path, capsys):
    address = f"http://127.0.0.1:{_free_port()}"
    code = main(["submit", "--address", address, f"workdir={tmp_path}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1
    assert err[0].startswith(f"lmforge: error: cannot reach the Ray Jobs API at {address}")


def test_rerun_with_an_address_submits_the_same_job_as_submit_rerun():
    rerun = _parser().parse_args(["rerun", "pretrain", "--downstream"])
    rerun.overrides, rerun.address = ["workdir=/shared/runs"], "http://head:8265"
    submit = _submit_args("--rerun", "pretrain", "--downstream", "workdir=/shared/runs")
    as_submit = jobs.rerun_as_submit(rerun)
    assert job_payload.pipeline_entrypoint(as_submit) == job_payload.pipeline_entrypoint(submit)
    assert as_submit.address == "http://head:8265" and not as_submit.no_wait


def test_verify_reaches_the_submitted_run():
    rerun = _parser().parse_args(["rerun", "pretrain", "--verify"])
    rerun.overrides, rerun.address = ["workdir=/shared/runs"], "http://head:8265"
    for args in (jobs.rerun_as_submit(rerun), _submit_args("--verify", "workdir=/shared/runs")):
        parsed = _parser().parse_args(shlex.split(job_payload.pipeline_entrypoint(args))[3:])
        assert parsed.verify


def test_lease_wait_reaches_the_submitted_run():
    rerun = _parser().parse_args(["rerun", "pretrain", "--lease-wait", "90"])
    rerun.overrides, rerun.address = ["workdir=/shared/runs"], "http://head:8265"
    submit = _submit_args("--lease-wait", "2.5", "workdir=/shared/runs")
    for args, seconds in ((jobs.rerun_as_submit(rerun), 90.0), (submit, 2.5)):
        parsed = _parser().parse_args(shlex.split(job_payload.pipeline_entrypoint(args))[3:])
        assert parsed.lease_wait == seconds
    plain = _parser().parse_args(shlex.split(job_payload.pipeline_entrypoint(_submit_args()))[3:])
    assert plain.lease_wait is None, "no flag: the run takes cluster.lease_wait_s"


def test_submit_sweep_becomes_lmforge_sweep_with_its_flags(monkeypatch):
    """`lmforge submit --address URL sweep KEY=a,b ...` runs `lmforge sweep` on the cluster."""
    import lmforge.pipeline.cli.main as cli

    seen = {}
    monkeypatch.setattr(cli, "_dispatch", lambda args: seen.setdefault("args", args) and 0)
    argv = ["submit", "--address", "http://head:8265", "sweep", "workdir=/shared/runs"]
    argv += ["train.lr=1e-3,3e-3", "--early-stop", "--max-concurrent", "2"]
    cli.main(argv)
    args = seen["args"]
    assert args.command == "submit" and args.sweep_job
    command = shlex.split(job_payload.pipeline_entrypoint(args))
    parsed = _parser().parse_args(command[3:])
    assert parsed.command == "sweep" and parsed.early_stop and parsed.max_concurrent == 2
    assert parsed.ray_address == "auto"
    assert "train.lr=1e-3,3e-3" in command


def test_submit_sweep_until_stops_the_submitted_sweeps_variants(monkeypatch):
    """`submit ... sweep ... --until STAGE`: the sweep on the cluster gets `--until STAGE`."""
    import lmforge.pipeline.cli.main as cli

    seen = {}
    monkeypatch.setattr(cli, "_dispatch", lambda args: seen.setdefault("args", args) and 0)
    argv = ["submit", "--address", "http://head:8265", "sweep", "workdir=/shared/runs"]
    cli.main([*argv, "train.lr=1e-3,3e-3", "--until", "perplexity"])
    parsed = _parser().parse_args(shlex.split(job_payload.pipeline_entrypoint(seen["args"]))[3:])
    assert parsed.command == "sweep" and parsed.until == "perplexity"
