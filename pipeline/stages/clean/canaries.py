"""The canaries `clean` plants in the train split, which `harm` looks for (memorisation)."""

from __future__ import annotations

import json
from pathlib import Path

from lmforge.pipeline.sources.data_config import DataConfig


def plant_canaries(cfg: DataConfig, out_dir: Path) -> int:
    """Write each canary `repeats` times as train documents; record them for `harm`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lmforge.pipeline.probes.memorisation import canaries_to_records, make_canaries
    from lmforge.pipeline.sources.parquet_shards import SCHEMA

    c = cfg.canaries
    canaries = make_canaries(c.per_repeat, c.seed, repeats=tuple(c.repeats), digits=c.digits)
    rows = [
        {
            "id": f"canary/{k.secret}/{copy}",
            "text": k.text,
            "source": "canary",
            "meta": "{}",
            "n_chars": len(k.text),
            "lang": "",
            "split": "train",
        }
        for k in canaries
        for copy in range(k.repeats)
    ]
    pq.write_table(
        pa.Table.from_pylist(rows, schema=SCHEMA),
        out_dir / "train-canaries.parquet",
        compression="zstd",
    )
    (out_dir / "canaries.json").write_text(json.dumps(canaries_to_records(canaries), indent=2))
    return len(rows)
