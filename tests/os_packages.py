"""The OS packages two integration tests need (PostgreSQL, Chromium), installed on first use
with `infra/ci/install_test_deps.sh` (apt; as root or through sudo), so that `make test` works
on a fresh machine."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "infra" / "ci" / "install_test_deps.sh"


@functools.cache
def ensure_os_packages() -> None:
    """Install what is missing (a no-op when everything is there); fail naming the cause."""
    proc = subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, timeout=900, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.fail(
            f"{SCRIPT.name} could not install the OS packages this test needs ({tail[0]}); "
            "run it as root, or install postgresql and chromium yourself"
        )
