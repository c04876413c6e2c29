"""Cluster subcommands: `submit`, `jobs`, `logs`, `stop` against a Ray cluster's Jobs API.

lmforge submit --address http://HEAD:8265 workdir=/shared/runs [--until STAGE] [--lease-wait S]
               [key=value ...]
lmforge submit --address http://HEAD:8265 --rerun STAGE [--downstream] workdir=/shared/runs
lmforge jobs | logs JOB [--follow] | stop JOB   (each with --address)

`submit` runs `lmforge run` (or `rerun`) as a Ray Job: the driver runs on the cluster and attaches
to it with `--ray-address auto`. The installed lmforge packages are copied into the job's
`working_dir` (so the code you have is the code that runs), or with `--image` the image's
installed lmforge runs. The address defaults to $RAY_API_SERVER_ADDRESS, then
http://127.0.0.1:8265; the token comes from $RAY_AUTH_TOKEN, the file $RAY_AUTH_TOKEN_PATH or
~/.ray/auth_token. What the job runs is built in `job_payload`: secrets in the overrides or in
MLFLOW_TRACKING_URI travel in the job's environment, never in its entrypoint or metadata.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import socket
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lmforge.pipeline.cluster.job_payload import job_payload
from lmforge.pipeline.engine.stage_leases import LEASE_WAIT_HELP
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.redaction import redact_text

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
PACKAGES = ("pipeline", "model", "tokenizer", "conf")
"""Subpackages of `lmforge` shipped as the job's working_dir."""


def register(sub, with_overrides) -> None:
    """Add `submit`, `jobs`, `logs` and `stop` to the `lmforge` parser."""
    submit = with_overrides(sub.add_parser("submit", help="run the pipeline as a Ray Job"))
    _address_flag(submit)
    submit.add_argument("--until", metavar="STAGE", help="stop after STAGE")
    submit.add_argument("--rerun", metavar="STAGE", help="submit `lmforge rerun STAGE` instead")
    submit.add_argument("--downstream", action="store_true", help="with --rerun: descendants too")
    submit.add_argument("--verify", action="store_true", help="check sha256 of cached files")
    submit.add_argument("--lease-wait", type=float, metavar="SECONDS", help=LEASE_WAIT_HELP)
    submit.add_argument("--no-wait", action="store_true", help="print the job id and return")
    submit.add_argument("--image", help="container image with lmforge installed (image_uri)")
    submit.add_argument("--job-id", help="submission id (default: lmforge-<time>-<random>)")
    submit.set_defaults(handler=submit_handler)

    jobs = sub.add_parser("jobs", help="list the cluster's Ray Jobs")
    _address_flag(jobs)
    jobs.set_defaults(handler=jobs_handler, overrides=[])

    logs = sub.add_parser("logs", help="print a Ray Job's logs")
    logs.add_argument("job_id", metavar="JOB")
    _address_flag(logs)
    logs.add_argument("--follow", "-f", action="store_true", help="follow until the job ends")
    logs.set_defaults(handler=logs_handler, overrides=[])

    stop = sub.add_parser("stop", help="stop a Ray Job")
    stop.add_argument("job_id", metavar="JOB")
    _address_flag(stop)
    stop.set_defaults(handler=stop_handler, overrides=[])


def _address_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        help=f"Jobs API of the head, http://HEAD:8265 (default: $RAY_API_SERVER_ADDRESS, "
        f"else {DEFAULT_ADDRESS})",
    )


def jobs_address(flag: str | None) -> str:
    """The Jobs API address: the flag, $RAY_API_SERVER_ADDRESS, else the loopback default."""
    address = (flag or os.environ.get("RAY_API_SERVER_ADDRESS") or DEFAULT_ADDRESS).rstrip("/")
    parsed = urllib.parse.urlparse(address)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise LmforgeError(
            f"--address {address!r} is not a Jobs API URL; give http://HEAD:8265 (the head's "
            "dashboard port), not the GCS address HEAD:6379"
        )
    return address


def auth_headers() -> dict[str, str]:
    """An Authorization header with the Ray token, if one is configured here."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    path_setting = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if not token and path_setting:
        path = Path(path_setting).expanduser()
        if not path.is_file():
            raise LmforgeError(f"RAY_AUTH_TOKEN_PATH={path} does not exist; point it at the token")
        token = path.read_text(encoding="utf-8").strip()
    if not token:
        default = Path.home() / ".ray" / "auth_token"
        token = default.read_text(encoding="utf-8").strip() if default.is_file() else ""
    return {"Authorization": f"Bearer {token}"} if token else {}


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds on a dead address (the Jobs client would wait on TCP for minutes)."""
    parsed = urllib.parse.urlparse(address)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise LmforgeError(
            f"cannot reach the Ray Jobs API at {address} ({exc.strerror or exc}); check --address "
            "and that the cluster's head is up (`ray status`)"
        ) from exc


@contextmanager
def _jobs_api(address: str, job_id: str | None = None) -> Iterator:
    """A JobSubmissionClient; transport and authentication failures become one clear line."""
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    _check_reachable(address)
    try:
        yield JobSubmissionClient(address, headers=auth_headers())
    except AuthenticationError as exc:
        if "required" in str(exc).lower():
            raise LmforgeError(
                f"the Ray cluster at {address} requires a token: set RAY_AUTH_TOKEN or "
                "RAY_AUTH_TOKEN_PATH to the cluster's token"
            ) from exc
        raise LmforgeError(
            f"the Ray cluster at {address} rejected the token: set RAY_AUTH_TOKEN or "
            "RAY_AUTH_TOKEN_PATH to the cluster's token"
        ) from exc
    except ConnectionError as exc:
        raise LmforgeError(f"lost the Ray Jobs API at {address}: {exc}") from exc
    except RuntimeError as exc:
        text = str(exc)
        if "404" in text and "job" in text.lower():
            raise LmforgeError(
                f"no job {job_id or ''} at {address}; list them with `lmforge jobs`"
            ) from exc
        raise LmforgeError(f"the Ray Jobs API at {address} failed: {text[:300]}") from exc


def stage_project(dest: Path) -> Path:
    """Copy the installed lmforge packages to `dest/lmforge/` (the job's working_dir is `dest`).

    The source tree maps folders onto `lmforge.*` (package-dir), so the repository root is not
    importable as is; the copy has the installed layout and shadows whatever the cluster has.
    """
    root = dest / "lmforge"
    top = importlib.util.find_spec("lmforge")
    if top is None or top.origin is None:
        raise LmforgeError("lmforge is not installed here; run `make demo` or `pip install -e .`")
    root.mkdir(parents=True)
    shutil.copy2(top.origin, root / "__init__.py")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
    for name in PACKAGES:
        spec = importlib.util.find_spec(f"lmforge.{name}")
        if spec is None or not spec.submodule_search_locations:
            raise LmforgeError(f"cannot find the installed package lmforge.{name}")
        shutil.copytree(spec.submodule_search_locations[0], root / name, ignore=skip)
    return dest


def submit_handler(args: argparse.Namespace, config: dict) -> int:
    """`lmforge submit`: submit the pipeline, print the job id, follow it unless --no-wait."""
    address = jobs_address(args.address)
    job = job_payload(args, config)
    runtime_env: dict = {"env_vars": job.env_vars}
    with _jobs_api(address) as api, tempfile.TemporaryDirectory(prefix="lmforge-job-") as tmp:
        if args.image:
            runtime_env["image_uri"] = args.image
        else:
            runtime_env["working_dir"] = str(stage_project(Path(tmp)))
            runtime_env["excludes"] = ["__pycache__", "*.pyc"]
        api.submit_job(
            entrypoint=job.entrypoint,
            submission_id=job.submission_id,
            runtime_env=runtime_env,
            metadata=job.metadata,
        )
        print(f"submitted job {job.submission_id} to {address}")
        if args.no_wait:
            print(f"follow it with: lmforge logs {job.submission_id} --follow --address {address}")
            return 0
        return _follow(api, job.submission_id, address)


def submit_rerun(args: argparse.Namespace, config: dict) -> int:
    """`lmforge rerun STAGE --address URL [--no-wait]`: the same as `submit --rerun STAGE`."""
    return submit_handler(rerun_as_submit(args), config)


def rerun_as_submit(args: argparse.Namespace) -> argparse.Namespace:
    """The `submit` arguments equivalent to parsed `rerun STAGE [--downstream]` arguments."""
    return argparse.Namespace(
        address=args.address,
        rerun=args.stage,
        downstream=args.downstream,
        verify=args.verify,
        lease_wait=getattr(args, "lease_wait", None),
        until=None,
        overrides=list(args.overrides),
        no_wait=getattr(args, "no_wait", False),
        image=getattr(args, "image", None),
        job_id=getattr(args, "job_id", None),
    )


def _follow(api, job_id: str, address: str) -> int:
    """Stream the job's logs until it ends; exit status 0 only if it SUCCEEDED."""

    async def tail() -> None:
        async for lines in api.tail_job_logs(job_id):
            print(lines, end="", flush=True)

    try:
        asyncio.run(tail())
    except KeyboardInterrupt:
        print(f"\nstopped following; job {job_id} keeps running (lmforge stop {job_id})")
        return 130
    info = api.get_job_info(job_id)
    reason = (info.message or "").strip().splitlines()[:1]  # the rest repeats the logs
    print(f"job {job_id} {info.status.value}" + (f": {reason[0]}" if reason else ""))
    return 0 if info.status.value == "SUCCEEDED" else 1


def jobs_handler(args: argparse.Namespace, config: dict) -> int:
    """`lmforge jobs`: the cluster's jobs, oldest first."""
    address = jobs_address(args.address)
    with _jobs_api(address) as api:
        jobs = sorted(api.list_jobs(), key=lambda j: j.start_time or 0)
    print(f"{'job':34} {'status':10} {'started':19} {'workdir':30} command")
    for job in jobs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((job.start_time or 0) / 1e3))
        meta = job.metadata or {}
        command = redact_text(meta.get("lmforge.command") or job.entrypoint)
        print(
            f"{job.submission_id or job.job_id:34} {job.status.value:10} {started:19} "
            f"{meta.get('lmforge.workdir', '-'):30} {command[:80]}"
        )
    return 0


def logs_handler(args: argparse.Namespace, config: dict) -> int:
    """`lmforge logs JOB`: everything the job printed so far (or follow it)."""
    address = jobs_address(args.address)
    with _jobs_api(address, args.job_id) as api:
        if args.follow:
            return _follow(api, args.job_id, address)
        print(api.get_job_logs(args.job_id), end="")
    return 0


def stop_handler(args: argparse.Namespace, config: dict, timeout_s: float = 90.0) -> int:
    """`lmforge stop JOB`: interrupt the job's driver and wait until the job has ended."""
    address = jobs_address(args.address)
    with _jobs_api(address, args.job_id) as api:
        if not api.stop_job(args.job_id):
            print(f"job {args.job_id} had already ended: {api.get_job_status(args.job_id).value}")
            return 0
        deadline = time.time() + timeout_s
        status = api.get_job_status(args.job_id)
        while not status.is_terminal() and time.time() < deadline:
            time.sleep(1)
            status = api.get_job_status(args.job_id)
    print(f"job {args.job_id} {status.value}")
    return 0 if status.is_terminal() else 1
