"""The estimate's coefficients file: a small versioned JSON of fitted coefficients per stage,
shipped with the package (`conf/estimate/coefficients.json`, fitted on the project's development
machine) or written by `lmforge estimate --calibrate` for this machine (`<workdir>/estimate/`).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from lmforge.durable import write_atomic
from lmforge.pipeline.errors import ConfigError

COEFFICIENTS_FORMAT = 1


def shipped_coefficients() -> Path:
    """The coefficients fitted on the project's development machine, shipped with the package."""
    from lmforge.pipeline.config_tree import config_dir

    return config_dir() / "estimate" / "coefficients.json"


def local_coefficients(workdir: Path) -> Path:
    """Where `lmforge estimate --calibrate` writes coefficients fitted on this machine."""
    return workdir / "estimate" / "coefficients.json"


def coefficients_path(explicit: str | None, workdir: Path) -> Path:
    """`--coefficients FILE`, else this workdir's calibration, else the shipped file."""
    if explicit:
        return Path(explicit).expanduser()
    local = local_coefficients(workdir)
    return local if local.is_file() else shipped_coefficients()


def load_coefficients(path: Path) -> dict[str, Any]:
    """A coefficients file, checked for its format version."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"no estimate coefficients at {path}: check the path") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not JSON ({exc}); refit with --calibrate") from exc
    if data.get("format") != COEFFICIENTS_FORMAT or not isinstance(data.get("stages"), dict):
        raise ConfigError(
            f"{path} is not an estimate coefficients file of format {COEFFICIENTS_FORMAT}; "
            "refit it with `lmforge estimate --calibrate`"
        )
    return data


def machine() -> str:
    """This machine in a few words: CPU model, cores, memory."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    return f"{model}, {os.cpu_count()} CPUs, {memory:.0f} GiB"


def write_coefficients(path: Path, stages: dict, samples: list[dict], command: str) -> None:
    """The coefficients file, written whole or not at all."""
    counts: dict[str, int] = {}
    for sample in samples:
        counts[sample["stage"]] = counts.get(sample["stage"], 0) + 1
    data = {
        "format": COEFFICIENTS_FORMAT,
        "fitted_on": {
            "machine": machine(),
            "date": time.strftime("%Y-%m-%d"),
            "command": command,
            "samples": counts,
        },
        "stages": {s: {k: float(f"{v:.6g}") for k, v in c.items()} for s, c in stages.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=2) + "\n")
