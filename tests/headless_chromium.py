"""A page of headless Chromium driven over the DevTools protocol with aiohttp (already a Ray
dependency), so the only extra need is the OS package: infra/ci/install_test_deps.sh installs it
on first use (`os_packages`)."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from os_packages import ensure_os_packages


def chromium() -> str:
    """The Chromium binary, installed first if missing; fails (never skips) naming the fix."""
    ensure_os_packages()
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.fail("Chromium is not installed: run infra/ci/install_test_deps.sh")


class HeadlessPage:
    """One Chromium tab driven over the DevTools protocol (a websocket of JSON commands)."""

    def __init__(self, binary: str, profile: Path) -> None:
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",  # required as root; the page is our own loopback server
                "--disable-gpu",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "--window-size=1400,900",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        active = profile / "DevToolsActivePort"
        deadline = time.time() + 30
        while not (active.is_file() and active.read_text().strip()):
            assert time.time() < deadline and self.proc.poll() is None, "Chromium did not start"
            time.sleep(0.1)
        self.port = int(active.read_text().split()[0])
        self._next_id = 0

    async def __aenter__(self) -> HeadlessPage:
        import aiohttp

        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{self.port}/json/list") as resp:
            targets = json.loads(await resp.text())
        page = next(t for t in targets if t["type"] == "page")
        self.ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.session.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)

    async def call(self, method: str, **params) -> dict:
        self._next_id += 1
        await self.ws.send_json({"id": self._next_id, "method": method, "params": params})
        while True:  # events arrive in between; take the reply to our command
            message = await asyncio.wait_for(self.ws.receive_json(), timeout=60)
            if message.get("id") == self._next_id:
                assert "error" not in message, message
                return message["result"]

    async def evaluate(self, expression: str):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def wait_for(self, expression: str, what: str, timeout_s: float = 90) -> None:
        deadline = time.time() + timeout_s
        while not await self.evaluate(expression):
            assert time.time() < deadline, f"the page never showed {what}"
            await asyncio.sleep(0.5)

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
