"""`clean`: raw sources -> normalised, filtered, deduplicated train/val zstd Parquet shards."""

from __future__ import annotations

import logging
import unicodedata
from collections import Counter
from collections.abc import Iterator

import xxhash
from lmforge.pipeline.filters.document import Document
from lmforge.pipeline.sources.config import DataConfig
from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.pipeline.sources.files import SourceError, expand_paths, read_source
from lmforge.pipeline.sources.parquet_shards import ShardWriter, split_of
from lmforge.pipeline.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping

log = logging.getLogger(__name__)


def parse(sections: dict) -> DataConfig:
    return from_mapping(DataConfig, sections["data"], "data")


def iter_documents(cfg: DataConfig, counts: Counter) -> Iterator[Document]:
    """All documents of all sources; unreadable files fail or are skipped per data.on_error."""
    if not cfg.paths:
        yield from embedded_documents()
        return
    for path in expand_paths(cfg.paths):
        try:
            yield from read_source(path, cfg.text_field)
        except SourceError as exc:
            if cfg.on_error == "fail":
                raise
            log.warning("skipping %s", exc)
            counts["files_skipped"] += 1


def normalise(doc: Document) -> Document | None:
    if isinstance(doc.text, bytes):
        return None
    text = unicodedata.normalize("NFC", doc.text).strip()
    return Document(id=doc.id, text=text, source=doc.source, meta=doc.meta)


def plant_canaries(cfg: DataConfig, train: ShardWriter, out_dir) -> int:
    """Append each canary `repeats` times to the train split; record them for `harm`."""
    import json

    from lmforge.pipeline.probes.memorisation import canaries_to_records, make_canaries

    canary = cfg.canaries
    canaries = make_canaries(
        canary.per_repeat, canary.seed, repeats=tuple(canary.repeats), digits=canary.digits
    )
    planted = 0
    for c in canaries:
        for copy in range(c.repeats):
            train.add(
                Document(id=f"canary/{c.secret}/{copy}", text=c.text, source="canary", meta={})
            )
            planted += 1
    (out_dir / "canaries.json").write_text(json.dumps(canaries_to_records(canaries), indent=2))
    return planted


@stage(name="clean", config=("data",), parse_config=parse, version="1", num_cpus=1)
def clean(ctx: StageContext) -> dict:
    cfg: DataConfig = ctx.config
    counts: Counter = Counter()
    writers = {s: ShardWriter(ctx.out_dir, s, cfg.docs_per_shard) for s in ("train", "val")}
    seen: set[int] = set()
    for raw in iter_documents(cfg, counts):
        counts["docs_in"] += 1
        if cfg.max_docs and counts["docs_in"] > cfg.max_docs:
            counts["docs_in"] -= 1
            break
        doc = normalise(raw)
        if doc is None:
            counts["dropped_undecodable"] += 1
            continue
        if not cfg.min_chars <= len(doc.text) <= cfg.max_chars:
            counts["dropped_length"] += 1
            continue
        digest = xxhash.xxh64_intdigest(doc.text.encode("utf-8"))
        if digest in seen:
            counts["dropped_exact_duplicate"] += 1
            continue
        seen.add(digest)
        writers[split_of(doc.id, cfg.val_fraction)].add(doc)
        counts["docs_out"] += 1
    if cfg.canaries.enabled:
        counts["canary_docs"] = plant_canaries(cfg, writers["train"], ctx.out_dir)
    shards = {s: w.close() for s, w in writers.items()}
    rows = {s: sum(x["rows"] for x in v) for s, v in shards.items()}
    if counts["docs_out"] == 0:
        raise ValueError(
            f"the corpus is empty after cleaning ({counts['docs_in']} documents read); "
            "check data.paths and the filter thresholds"
        )
    if rows["val"] == 0 or rows["train"] == 0:
        raise ValueError(
            f"a split is empty (train={rows['train']}, val={rows['val']}); add documents or "
            "change data.val_fraction"
        )
    dropped = {k: v for k, v in counts.items() if k.startswith("dropped_")}
    assert counts["docs_in"] == counts["docs_out"] + sum(dropped.values()), counts
    for split in ("train", "val"):
        ctx.tracker.log_dataset(
            ctx.out_dir.parent / ctx.key, f"clean-{split}", ctx.key, context=split
        )
    return {
        "docs_in": counts["docs_in"],
        "docs_out": counts["docs_out"],
        "train_docs": rows["train"],
        "val_docs": rows["val"],
        "files_skipped": counts["files_skipped"],
        "canary_docs": counts["canary_docs"],
        **dropped,
        "shards": shards,
    }
