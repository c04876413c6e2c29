"""Calibration samples from a store: every committed stage artifact whose manifest records its
estimate (`measured.py` writes it) is a measured run of that stage at its size."""

from __future__ import annotations

import json
from pathlib import Path


def samples_from_store(store: Path) -> list[dict]:
    """A sample `{"stage", "size", "measured", "source"}` per committed stage artifact whose
    manifest records its estimate."""
    found = []
    for manifest in sorted(store.glob("*/*/manifest.json")):
        data = json.loads(manifest.read_text(encoding="utf-8"))
        record = data.get("estimate") or {}
        if "size" not in record:
            continue
        measured = {"wall_s": record["measured_s"], **record.get("measured", {})}
        if record.get("measured_artifact_bytes"):
            measured["store_bytes"] = record["measured_artifact_bytes"]
        found.append(
            {
                "stage": data["stage"],
                "size": record["size"],
                "measured": measured,
                "source": str(manifest.parent),
            }
        )
    return found
