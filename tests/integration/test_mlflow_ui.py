"""What a person sees: `lmforge ui` opened in headless Chromium shows the pipeline run, and
expanding it shows one nested run per stage. The screenshot is kept as a test artifact (in
$LMFORGE_TEST_ARTIFACTS if set, else in pytest's temporary directory, which keeps the last runs).

Chromium is driven over the DevTools protocol with aiohttp (already a Ray dependency), so the
only extra need is the OS package: infra/ci/install_test_deps.sh installs it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cli_runner import LMFORGE, lmforge, small_corpus, status
from os_packages import ensure_os_packages

from lmforge.pipeline.engine.tracking import client

pytestmark = pytest.mark.integration


def _chromium() -> str:
    ensure_os_packages()
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.fail("Chromium is not installed: run infra/ci/install_test_deps.sh")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


@pytest.fixture
def tracked_workdir(workdir):
    """A workdir whose MLflow store holds one pipeline run (clean, train_tokenizer)."""
    lmforge(
        "run", "--until", "train_tokenizer", *small_corpus(workdir.parent), f"workdir={workdir}"
    )
    return workdir


@pytest.fixture
def ui_server(tracked_workdir):
    """`lmforge ui` for the workdir on a free loopback port."""
    workdir = tracked_workdir
    port = _free_port()
    proc = subprocess.Popen(
        [*LMFORGE, "ui", f"workdir={workdir}", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, "lmforge ui exited"
                assert time.time() < deadline, "lmforge ui did not answer within 120 s"
                time.sleep(1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _row(run_id: str) -> str:
    return f"document.querySelector('[role=row][row-id=\"{run_id}\"]')"


def test_the_mlflow_ui_shows_the_pipeline_run_with_its_nested_stage_runs(
    tracked_workdir, tmp_path, ui_server
):
    chromium = _chromium()
    workdir = tracked_workdir
    stages = status(workdir)
    mlflow = client(f"sqlite:///{workdir / 'mlflow.db'}")
    children = {name: entry["mlflow_run_id"] for name, entry in stages.items()}
    parent = mlflow.get_run(mlflow.get_run(children["clean"]).data.tags["mlflow.parentRunId"])
    experiment = parent.info.experiment_id
    artifacts = Path(os.environ.get("LMFORGE_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "mlflow_ui_nested_runs.png"

    async def look() -> None:
        async with HeadlessPage(chromium, tmp_path / "chromium-profile") as page:
            await page.call("Page.enable")
            await page.call("Page.navigate", url=f"{ui_server}/#/experiments/{experiment}/runs")
            await page.wait_for(
                f"{_row(parent.info.run_id)}?.innerText.includes('{parent.info.run_name}')",
                f"the pipeline run {parent.info.run_name}",
            )
            toggle = "button[data-component-id*=runnamecell]"  # the +/- beside a parent's name
            expander = f"{_row(parent.info.run_id)}.querySelector('{toggle}')"
            assert await page.evaluate(f"!!{expander}"), "the pipeline run cannot be expanded"
            await page.evaluate(f"{expander}.click()")
            for name, run_id in children.items():
                await page.wait_for(
                    f"{_row(run_id)}?.innerText.includes('{name}')", f"the nested run {name}"
                )
            await page.screenshot(shot)

    asyncio.run(look())
    print(f"screenshot: {shot}", file=sys.stderr)
    assert shot.stat().st_size > 10_000
