"""Installing the OS packages some tests need never waits on a sudo password prompt: it runs as
root or through `sudo -n`, and otherwise fails at once naming the command to run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from os_packages import SCRIPT, CannotInstall, install_command

NOBODY = 65534


def test_root_runs_the_install_script_itself():
    assert install_command(["chromium"], uid=0, passwordless_sudo=False) == ["bash", str(SCRIPT)]


def test_a_user_with_passwordless_sudo_goes_through_non_interactive_sudo():
    command = install_command(["chromium"], uid=1000, passwordless_sudo=True)
    assert command[:2] == ["sudo", "-n"]
    assert command[2:] == ["bash", str(SCRIPT)]


def test_a_user_without_passwordless_sudo_is_told_the_exact_command_to_run():
    with pytest.raises(CannotInstall) as info:
        install_command(["postgresql", "chromium"], uid=1000, passwordless_sudo=False)
    assert "run: sudo apt-get install -y postgresql chromium" in str(info.value)


@pytest.fixture
def bare_path():
    """A PATH without chromium or ip (so they count as missing), readable by any user."""
    folder = Path(tempfile.mkdtemp(prefix="lmf-path-"))
    folder.chmod(0o755)
    for tool in ("id", "sudo"):
        if found := shutil.which(tool):
            (folder / tool).symlink_to(found)
    yield folder
    shutil.rmtree(folder)


def test_the_script_run_by_a_user_without_sudo_rights_fails_at_once_naming_the_command(bare_path):
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run the script as the unprivileged user nobody")
    started = time.time()
    proc = subprocess.run(
        [shutil.which("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        + [shutil.which("bash"), str(SCRIPT)],
        env={"PATH": str(bare_path), "HOME": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert time.time() - started < 30
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "run: sudo apt-get install -y chromium iproute2" in lines[0]
