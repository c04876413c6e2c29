"""`lmforge status`: the latest (or a named) pipeline run, as a table or stable JSON."""

from __future__ import annotations

import json

from lmforge.pipeline.engine.run_records import PipelineRecord
from lmforge.pipeline.storage.leases.lease import describe_holder

JSON_FIELDS = (
    "stage",
    "key",
    "state",
    "artifact",
    "mlflow_run_id",
    "duration_s",
    "error",
    "holder",
)
"""Each stage's fields in `status --json` (frozen names: new ones are added, never renamed);
`holder`: while the stage runs or waits, the run holding its lease ({run, host, pid, since})."""


def status_json(record: PipelineRecord) -> str:
    """The stable interface for scripts: a list of objects, one per stage."""
    return json.dumps(
        [{f: getattr(stage, f) for f in JSON_FIELDS} for stage in record.stages], indent=2
    )


def status_table(record: PipelineRecord) -> str:
    header = f"pipeline run {record.run_id} ({record.command}): {record.state}"
    if record.mlflow_run_id:
        header += f"   MLflow run {record.mlflow_run_id}"
    held = any(stage.holder for stage in record.stages)  # a run under way: who holds what
    rows = [("stage", "key", "state", "duration", "MLflow run id", "artifact")]
    rows[0] += ("held by",) if held else ()
    for stage in record.stages:
        duration = f"{stage.duration_s:.1f}s" if stage.duration_s is not None else "-"
        row = (
            stage.stage,
            stage.key,
            stage.state,
            duration,
            stage.mlflow_run_id or "-",
            stage.artifact or "-",
        )
        rows.append(
            row + ((describe_holder(stage.holder) if stage.holder else "-",) if held else ())
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [header, ""]
    for row in rows:
        lines.append(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip()
        )
    for stage in record.stages:
        if stage.error:
            lines.append(f"\n{stage.stage}: {stage.error}")
        if stage.warning:
            lines.append(f"\n{stage.stage}: warning: {stage.warning}")
    return "\n".join(lines)
