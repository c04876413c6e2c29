"""What `lmforge submit` sends to a Ray cluster: the entrypoint, its metadata and its environment.

Anyone who can list the cluster's jobs reads a job's entrypoint and metadata (`lmforge jobs`, the
dashboard), so neither holds a secret: an override whose value is one (a URI with `user:pass@`, a
token, a key named like `*_token`) becomes `key=${oc.env:LMFORGE_SECRET_KEY}` on the command line
and its value travels in the job's runtime_env `env_vars`, where the driver's config resolves it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.redaction import is_secret_name, redact_text, redact_value

FORWARDED_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME")
"""Variables passed on to the job, in its environment, when set here."""
STOP_ENV = {"RAY_JOB_STOP_WAIT_TIME_S": "60"}
"""`lmforge stop` sends the driver SIGTERM (handled like Ctrl-C: its open MLflow runs become
KILLED) and gives it this long before SIGKILL."""
SECRET_ENV_PREFIX = "LMFORGE_SECRET_"


@dataclass(slots=True)
class JobPayload:
    """The parts of a Ray Job submission that lmforge decides (code shipping aside)."""

    submission_id: str
    entrypoint: str
    metadata: dict[str, str]
    env_vars: dict[str, str] = field(default_factory=dict)


def job_payload(args: argparse.Namespace, config: dict) -> JobPayload:
    """The job for `lmforge submit ARGS`: secrets only in `env_vars`, never in what jobs list."""
    overrides, secret_env = split_secret_overrides(args.overrides)
    entrypoint = pipeline_entrypoint(args, overrides)
    workdir = _shared_workdir(config)
    job_id = args.job_id or f"lmforge-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    command = "lmforge " + entrypoint.split("lmforge.pipeline.cli.main ", 1)[-1]
    return JobPayload(
        submission_id=job_id,
        entrypoint=entrypoint,
        metadata={"lmforge.workdir": redact_text(workdir), "lmforge.command": command},
        env_vars={**STOP_ENV, **_forwarded_env(), **secret_env},
    )


def pipeline_entrypoint(args: argparse.Namespace, overrides: list[str] | None = None) -> str:
    """The shell command the job runs: `lmforge run|rerun` attached to the cluster."""
    overrides = list(args.overrides if overrides is None else overrides)
    command = ["python", "-m", "lmforge.pipeline.cli.main"]
    # Overrides right after the verb (and stage): argparse reads positionals in one run.
    if getattr(args, "sweep_job", False):
        command += ["sweep", *overrides, *sweep_flags(args)]
        command += ["--until", args.until] if getattr(args, "until", None) else []
    elif args.rerun:
        command += ["rerun", args.rerun, *overrides]
        command += ["--downstream"] if args.downstream else []
    else:
        if args.downstream:
            raise LmforgeError("--downstream only goes with --rerun STAGE")
        command += ["run", *overrides]
        command += ["--until", args.until] if args.until else []
    sweep = getattr(args, "sweep_job", False)
    command += ["--verify"] if getattr(args, "verify", False) and not sweep else []
    lease_wait = getattr(args, "lease_wait", None)
    command += ["--lease-wait", f"{lease_wait:g}"] if lease_wait is not None else []
    command += ["--ray-address", "auto"]
    return shlex.join(command)


def sweep_flags(args: argparse.Namespace) -> list[str]:
    """`lmforge sweep`'s flags as they were given to `submit ... sweep`."""
    flags: list[str] = []
    for name in ("random", "max_concurrent", "grace_period", "reduction_factor"):
        value = getattr(args, name, None)
        flags += [f"--{name.replace('_', '-')}", f"{value:g}"] if value is not None else []
    if getattr(args, "random", None) is not None:
        flags += ["--seed", str(args.seed)]
    return flags + (["--early-stop"] if getattr(args, "early_stop", False) else [])


def split_secret_overrides(overrides: list[str]) -> tuple[list[str], dict[str, str]]:
    """Overrides with each secret value replaced by a reference to the variable that holds it."""
    safe: list[str] = []
    env: dict[str, str] = {}
    for item in overrides:
        key, has_value, value = item.partition("=")
        bare = _unquoted(value)
        if not has_value or (not is_secret_name(key) and redact_value(bare) == bare):
            safe.append(item)
            continue
        if bare.startswith(("[", "{")):
            raise LmforgeError(
                f"the override {key}=... holds a secret inside a list or mapping; a submitted job "
                "takes secrets only as whole values (key=VALUE): set that one on its own"
            )
        name = SECRET_ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", key.lstrip("+~")).upper()
        env[name] = bare
        safe.append(f"{key}=${{oc.env:{name}}}")
    return safe, env


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _shared_workdir(config: dict) -> str:
    workdir = str(config["workdir"])
    if not Path(workdir).is_absolute():
        raise LmforgeError(
            f"submit needs workdir=/ABSOLUTE/PATH on storage every node can reach (got "
            f"workdir={workdir!r}, which would land in the job's temporary directory)"
        )
    return workdir


def _forwarded_env() -> dict[str, str]:
    return {name: os.environ[name] for name in FORWARDED_ENV if os.environ.get(name)}
