"""Running the real `lmforge` CLI: in a subprocess, as a user would (`lmforge`), or in this
process (`lmforge_here`: `main(argv)`), where a subprocess would prove nothing more and cost a
Python start and its imports.

A run in this process starts a local Ray runtime, as `lmforge run` does, or uses the one already
up (`ensure_ray`). That runtime stays up for the next test module marked `shares_ray` (and the
stage tests): its start and its pooled workers' imports (MLflow, pyarrow, torch) are paid once
for all of them. `tests/conftest.py` shuts it down before any other module. Where a test checks
the runtime's own start (its token, or that none started), the calls run in `in_process_ray`."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

LMFORGE = [sys.executable, "-m", "lmforge.pipeline.cli.main"]

SMALL_MODEL = ["model.d_model=64", "model.n_layer=2", "model.d_ff=256", "model.block_size=64"]
"""Half the tiny preset's width and depth, on 64-token windows: seconds per stage."""

SHORT_TINY = [
    *SMALL_MODEL,
    "eval.perplexity.max_tokens=4096",
    "eval.sample.max_new_tokens=16",
    "train.max_steps=20",
    "train.checkpoint_every=10",
    "train.sequence_unlikelihood_steps=5",  # the preset's phase, its last steps
    "eval.harm.num_prompts=4",
    "eval.harm.bias_samples=0",
    "eval.harm.pii_samples=4",
]
"""The `tiny` pipeline trained and probed briefly, for tests about where and how it runs."""


SMALL_CORPUS_DOCS = 40


def small_corpus(directory: Path) -> list[str]:
    """Overrides that point `clean` at a JSONL file of 40 documents of the embedded corpus,
    written in `directory` once: for tests of the pipeline's plumbing (caching, tracking,
    secrets), not of its data. `clean` of the whole embedded corpus takes 13-15 s of each run."""
    from lmforge.pipeline.sources.embedded import embedded_documents

    corpus = Path(directory) / "small-corpus.jsonl"
    if not corpus.exists():
        texts = [d.text for d in embedded_documents() if 1500 < len(d.text) < 30000]
        texts = texts[:SMALL_CORPUS_DOCS]
        lines = (json.dumps({"id": f"doc{i}", "text": t}) + "\n" for i, t in enumerate(texts))
        corpus.write_text("".join(lines), encoding="utf-8")
    return [f"data.paths=[{corpus}]", "data.val_fraction=0.3"]


def lmforge(*args: str, env: dict | None = None, timeout: int = 900, check: bool = True):
    """Run `lmforge ARGS...`; returns the CompletedProcess (stdout+stderr in .stdout)."""
    started = time.time()
    proc = subprocess.run(
        [*LMFORGE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    proc.elapsed = time.time() - started  # type: ignore[attr-defined]
    if check and proc.returncode != 0:
        raise AssertionError(f"lmforge {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}")
    return proc


@dataclass
class Called:
    """What `lmforge_here` returns: as `lmforge`'s CompletedProcess, the exit code and what the
    command printed, stdout and stderr together in `stdout`."""

    returncode: int
    stdout: str


RUNTIME_SETTINGS = re.compile(
    r"^(--ray-address$|\+?cluster\.(ray_address|num_cpus|local_dashboard)=)"
)
"""Arguments that choose the Ray runtime a run starts or attaches to."""


def lmforge_here(*args: str, check: bool = True) -> Called:
    """`lmforge ARGS...` as `main(argv)` in this process, its output captured. A run that chooses
    its Ray runtime (`RUNTIME_SETTINGS`) gets a runtime of its own (`in_process_ray`)."""
    from lmforge.pipeline.cli.main import main

    own_runtime = any(RUNTIME_SETTINGS.match(arg) for arg in args)
    printed = io.StringIO()
    with (
        in_process_ray() if own_runtime else contextlib.nullcontext(),
        contextlib.redirect_stdout(printed),
        contextlib.redirect_stderr(printed),
    ):
        code = main(list(args))
    called = Called(code, printed.getvalue())
    if check and code != 0:
        raise AssertionError(f"lmforge {' '.join(args)} exited {code}:\n{called.stdout}")
    return called


sharing_ray = False
"""Whether the running test module is `shares_ray` (`tests/conftest.py` sets it at the module's
start): a runtime up then may be one kept from an earlier module."""


def stop_ray() -> None:
    """Shut down this process's Ray runtime, if one is up, and put back the environment it set."""
    if "ray" not in sys.modules:
        return
    from lmforge.pipeline.cluster.ray_runtime import shutdown_ray

    shutdown_ray()


@contextlib.contextmanager
def in_process_ray() -> Iterator[None]:
    """Around `lmforge_here` calls that start a Ray runtime of their own: in a `shares_ray`
    module, a runtime kept from another module is shut down first; the one the first call starts
    serves the others and is shut down after them."""
    if sharing_ray:
        stop_ray()
    try:
        yield
    finally:
        stop_ray()


RAY_WORKER_LINE = re.compile(r"^(\x1b\[[0-9;]*m)?\([^)]*pid=\d+")
"""A line a Ray worker printed, as Ray's log monitor forwards it to this process's stdout."""


def status(workdir: Path) -> dict[str, dict]:
    """`lmforge status --json`: each stage's entry of the workdir's latest pipeline run (the
    lines of a Ray runtime this process still holds, forwarded meanwhile, left out)."""
    from lmforge.pipeline.cli.main import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["status", "--json", f"workdir={workdir}"])
    assert code == 0, f"lmforge status workdir={workdir} exited {code}"
    lines = [line for line in printed.getvalue().splitlines() if not RAY_WORKER_LINE.match(line)]
    return {entry["stage"]: entry for entry in json.loads("\n".join(lines))}


def summary(workdir: Path, stage: str) -> dict:
    entry = status(workdir)[stage]
    return json.loads((Path(entry["artifact"]) / "manifest.json").read_text())["summary"]


def settled_count(root: Path, pattern: str, quiet_s: float = 5.0) -> int:
    """How many files match once none has appeared for `quiet_s` (a task already running in a
    Ray worker may still finish after its driver died)."""
    count, since = -1, time.time()
    while time.time() - since < quiet_s:
        now = len(list(root.glob(pattern)))
        if now != count:
            count, since = now, time.time()
        time.sleep(0.2)
    return count


def kill_once(proc: subprocess.Popen, root: Path, pattern: str, at_least: int = 1) -> None:
    """SIGKILL the process group `proc` leads once `at_least` files match `pattern` under
    `root` (within 5 minutes)."""
    deadline = time.time() + 300
    while len(list(root.glob(pattern))) < at_least:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else proc.returncode
        assert time.time() < deadline, f"no {pattern} within 5 minutes"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
