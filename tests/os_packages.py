"""The OS packages two integration tests need (PostgreSQL, Chromium), installed on first use
with `infra/ci/install_test_deps.sh` (apt; as root or through sudo that asks no password), so
that `make test` works on a fresh machine. It never waits on a password prompt: without root or
passwordless sudo the test fails at once, naming the command to run."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "infra" / "ci" / "install_test_deps.sh"


class CannotInstall(Exception):
    """Installing needs a password (or root) that a test run cannot type."""


def install_command(missing: list[str], uid: int, passwordless_sudo: bool) -> list[str]:
    """The command that installs `missing` without any prompt, or CannotInstall naming the
    command for the user to run."""
    if uid == 0:
        return ["bash", str(SCRIPT)]
    if passwordless_sudo:
        return ["sudo", "-n", "bash", str(SCRIPT)]
    raise CannotInstall(
        f"the OS packages {' '.join(missing)} are missing and installing them needs root "
        f"(no passwordless sudo here); run: sudo apt-get install -y {' '.join(missing)}"
    )


def _passwordless_sudo() -> bool:
    if shutil.which("sudo") is None:
        return False
    probe = ["sudo", "-n", "true"]
    return subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True).returncode == 0


@functools.cache
def ensure_os_packages() -> None:
    """Install what is missing (a no-op when everything is there); fail naming the cause."""
    listing = subprocess.run(
        ["bash", str(SCRIPT), "--missing"], capture_output=True, text=True, check=True
    )
    missing = listing.stdout.split()
    if not missing:
        return
    try:
        command = install_command(missing, os.getuid(), _passwordless_sudo())
    except CannotInstall as exc:
        pytest.fail(str(exc))
    proc = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.fail(
            f"{SCRIPT.name} could not install {' '.join(missing)} ({tail[0]}); "
            f"run: sudo apt-get install -y {' '.join(missing)}"
        )
