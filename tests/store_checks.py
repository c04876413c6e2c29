"""What a failed stage may leave in the artifact store: nothing at all."""

from __future__ import annotations

from pathlib import Path

ERROR_PREFIX = "lmforge: error:"


def leftovers(store: Path, stage: str) -> list[str]:
    """Everything under store/<stage>/: manifests, artifact directories, `.tmp-*` directories."""
    folder = store / stage
    return sorted(str(p.relative_to(store)) for p in folder.rglob("*")) if folder.exists() else []


def error_lines(output: str) -> list[str]:
    """The CLI's error lines in `output` (stdout and stderr together)."""
    return [line for line in output.splitlines() if line.startswith(ERROR_PREFIX)]
