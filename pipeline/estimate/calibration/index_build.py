"""A sample index built by a fresh process, its time and peak memory read from /proc: the
`sample_index` calibration case and `bench/token_scale.py` measure the build so.

    python -m lmforge.pipeline.estimate.calibration.index_build DIR WINDOWS   # prints one JSON
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

BLOCK, MAX_OFFSET = 128, 127
"""The tiny preset's block size and window shift."""
SEED = 0


def build_index(directory: str, windows: int) -> dict:
    """Build an index of `windows` windows (one epoch, uint32, shuffled in place in the
    memory-mapped file) in `directory`: seconds, peak RSS (VmHWM), RSS after the imports, the
    rise of anonymous memory (no copy of the order) and CPU seconds."""
    from lmforge.pipeline.training.data.sample_index import build_sample_index

    imports_rss, imports_anon = status_mb("VmRSS"), status_mb("RssAnon")
    started = time.perf_counter()
    build_sample_index(
        directory,
        n_windows=windows,
        seed=SEED,
        max_offset=MAX_OFFSET,
        epochs=1,
        block_size=BLOCK,
        data_fingerprint="synthetic",
    )
    return {
        "build_s": round(time.perf_counter() - started, 1),
        "peak_rss_mb": round(status_mb("VmHWM"), 1),
        "imports_rss_mb": round(imports_rss, 1),
        "anon_rise_mb": round(status_mb("RssAnon") - imports_anon, 1),  # no copy of the order
        "cpu_s": cpu_s(),
    }


def build_in_fresh_process(directory: Path, windows: int) -> dict:
    """`build_index` in a process of its own, so its peak memory is the build's."""
    command = [sys.executable, "-m", __spec__.name, str(directory), str(int(windows))]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"building an index of {windows} windows failed: see its output above")
    return json.loads(done.stdout.strip().splitlines()[-1])


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (`VmRSS`, `VmHWM`...), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(who: int = resource.RUSAGE_SELF) -> float:
    """CPU seconds (user + system) of this process, or of its reaped children."""
    usage = resource.getrusage(who)
    return round(usage.ru_utime + usage.ru_stime, 2)


if __name__ == "__main__":
    print(json.dumps(build_index(sys.argv[1], int(sys.argv[2]))))
