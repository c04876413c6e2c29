"""Paragraph dedup: normalised units repeated in `min_docs` documents leave all of them but the
smallest id, whatever the read units and hash ranges the sharded step cuts the corpus into (the
same decisions as the in-memory reference), and a document left too short is dropped with its
reason."""

from __future__ import annotations

import random

import numpy as np
import pyarrow.parquet as pq
import pytest

from lmforge.pipeline.dedup.in_memory import in_memory_paragraph_removals
from lmforge.pipeline.dedup.index import IndexReader, key_ranges
from lmforge.pipeline.dedup.index_writer import write_unit_index
from lmforge.pipeline.dedup.paragraph import NODE, paragraph_partition
from lmforge.pipeline.dedup.paragraph_index import ParagraphIndexWriter
from lmforge.pipeline.dedup.resolve import remove_list_path
from lmforge.pipeline.filters.dedup_paragraph import (
    ParagraphDedupConfig,
    counted_hashes,
    normalize_unit,
    unit_hash,
    unit_hashes_of_batch,
)
from lmforge.pipeline.sources.data_config import DataConfig
from lmforge.pipeline.stages.clean.paragraph_removal import (
    PARAGRAPH_DUPLICATES_DIR,
    ParagraphRemoval,
    most_repeated_units,
)
from lmforge.pipeline.stages.clean.partition import EXCLUDED_DIR, EXCLUDED_SCHEMA
from lmforge.pipeline.storage.artifact_output import ArtifactOutput
from lmforge.pipeline.storage.shared_dir import SharedDir

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "river",
    "stone",
]
FOOTER = "Found a bug? Report it on our tracker, please."


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))) + "."


def sharded(
    tmp_path,
    ids: list[str],
    texts: list[str],
    cfg: ParagraphDedupConfig,
    n_units: int,
    n_ranges: int,
    gone: dict[int, list[int]] | None = None,
) -> tuple[list[tuple[int, int]], list[str]]:
    """Cut the corpus into read units, write their indexes (and remove lists `gone`: unit ->
    rows the document steps removed), count over `n_ranges` ranges; (unit bounds, outputs)."""
    rng = random.Random(n_units)
    cuts = sorted(rng.sample(range(1, len(ids)), n_units - 1))
    bounds = list(zip([0, *cuts], [*cuts, len(ids)], strict=True))
    index_dir, work = tmp_path / "index", tmp_path / "work"
    work.mkdir()
    for unit, (a, b) in enumerate(bounds):
        write_unit_index(index_dir, unit, ids[a:b], np.zeros(b - a, np.uint64), None, None)
        writer = ParagraphIndexWriter(index_dir, unit)
        for start in range(a, b, 7):  # batches, as a filter task writes them
            hashes, rows = unit_hashes_of_batch(texts[start : min(b, start + 7)], cfg)
            writer.add(hashes, rows + start - a)
        writer.close()
    for unit, rows in (gone or {}).items():
        table = np.stack([np.array(rows), np.zeros(len(rows)), np.zeros(len(rows))]).astype(int)
        np.save(remove_list_path(work, unit), table)
    outputs = []
    for p, (lo, hi) in enumerate(key_ranges(n_ranges)):
        outputs.append(str(work / f"paragraphs-{p:05d}.npy"))
        units = list(range(len(bounds)))
        paragraph_partition(str(index_dir), units, lo, hi, cfg.min_docs, str(work), outputs[-1])
        assert np.all(np.diff(np.load(outputs[-1])[NODE]) >= 0), "sorted for the split tasks"
    return bounds, outputs


def decisions(tmp_path, ids, outputs) -> dict[str, set[int]]:
    """document id -> unit hashes it loses, from the counting tasks' outputs."""
    reader = IndexReader(tmp_path / "index")
    found: dict[str, set[int]] = {}
    for path in outputs:
        nodes, hashes, _ = np.load(path)
        for doc_id, h in zip(reader.ids(nodes), hashes.view(np.uint64).tolist(), strict=True):
            found.setdefault(doc_id.decode(), set()).add(h)
    return found


def test_dates_and_numbers_normalise_to_one_unit():
    cfg = ParagraphDedupConfig()
    assert normalize_unit("  Last updated on October 7.") == "last updated on october 0"
    assert counted_hashes("Last updated on October 7", cfg) == counted_hashes(
        "LAST   updated on october 9 !", cfg
    )
    assert counted_hashes("Last updated on October 7", cfg) != counted_hashes(
        "Last updated in October 7", cfg
    )


def test_short_units_never_count_and_a_unit_counts_once_a_document():
    cfg = ParagraphDedupConfig(min_chars=10)
    text = "}\n*\n  -- \nFound a bug? Report it.\nFound a bug? REPORT it!"
    assert counted_hashes(text, cfg) == [unit_hash("found a bug? report it")]
    paragraphs = ParagraphDedupConfig(unit="paragraph")
    assert (
        len(counted_hashes("one line here\nand its second\n\n  \n\nanother paragraph", paragraphs))
        == 2
    )


def test_planted_boilerplate_stays_in_one_document_and_distinct_lines_everywhere(tmp_path):
    rng = random.Random(0)
    cfg = DataConfig()
    bodies = [[sentence(rng) for _ in range(6)] for _ in range(40)]
    texts = [
        "\n".join(["Home | Docs | Blog", *body, f"Last updated on October {i % 9 + 1}.", FOOTER])
        for i, body in enumerate(bodies)
    ]
    ids = [f"doc{i:03d}" for i in range(40)]
    rng.shuffle(ids)  # the smallest id is not the first document
    bounds, outputs = sharded(tmp_path, ids, texts, cfg.dedup.paragraph, n_units=4, n_ranges=3)

    kept: dict[str, str] = {}
    for unit, (a, b) in enumerate(bounds):
        removal = ParagraphRemoval(unit, cfg, SharedDir(str(tmp_path)), outputs)
        for row in range(b - a):
            doc = {"id": ids[a + row], "text": texts[a + row], "source": "t"}
            kept[doc["id"]] = removal.apply(row, doc)["text"]
    first = min(ids)
    for doc_id, text in kept.items():
        planted = [FOOTER in text, "Home | Docs | Blog" in text, "Last updated on" in text]
        assert planted == [doc_id == first] * 3, doc_id
    for doc_id, body in zip(ids, bodies, strict=True):
        assert all(line in kept[doc_id] for line in body), "distinct lines stay"


def test_a_document_emptied_or_left_too_short_is_dropped_with_its_reason(tmp_path):
    rng = random.Random(1)
    texts = [
        "\n".join([sentence(rng) for _ in range(12)] + [FOOTER, "Share this page with friends"])
        for _ in range(4)
    ]
    texts += [FOOTER + "\nShare this page with friends", FOOTER + "\n" + sentence(rng)]
    ids = [f"d{i}" for i in range(len(texts))]
    cfg = DataConfig()
    bounds, outputs = sharded(tmp_path, ids, texts, cfg.dedup.paragraph, n_units=2, n_ranges=2)
    output = ArtifactOutput(str(tmp_path / "artifact"))
    removals = [ParagraphRemoval(u, cfg, SharedDir(str(tmp_path)), outputs) for u in (0, 1)]
    results = {}
    for unit, (a, b) in enumerate(bounds):
        for row in range(b - a):
            doc = {"id": ids[a + row], "text": texts[a + row], "source": "t"}
            results[doc["id"]] = removals[unit].apply(row, doc)
    assert results["d0"]["text"] == texts[0], "the smallest id keeps its footer"
    assert all(FOOTER not in results[f"d{i}"]["text"] for i in (1, 2, 3))
    assert results["d4"] is None and results["d5"] is None
    dropped = {e.id: e for r in removals for e in r.excluded}
    assert dropped["d4"].reason == "paragraph_dedup_empty"
    assert dropped["d5"].reason == "paragraph_dedup_too_few_chars"
    assert {e.step for e in dropped.values()} == {"paragraph_dedup"}
    finished = [r.finish(output, EXCLUDED_DIR, EXCLUDED_SCHEMA) for r in removals]
    assert sum(f["counts"]["docs_dropped"] for f in finished) == 2
    assert sum(f["counts"]["docs_touched"] for f in finished) == 5
    assert sum(f["dropped"].get("paragraph_dedup_empty", 0) for f in finished) == 1
    units = pq.read_table(tmp_path / "artifact" / PARAGRAPH_DUPLICATES_DIR).to_pylist()
    footer = [u for u in units if u["unit"] == FOOTER]
    assert sum(u["removed"] for u in footer) == 5 and {u["documents"] for u in footer} == {6}
    excluded = pq.read_table(tmp_path / "artifact" / EXCLUDED_DIR).to_pylist()
    assert sorted(e["id"] for e in excluded) == ["d4", "d5"]
    top = most_repeated_units(tmp_path / "artifact", 1)
    assert [(u["unit"], u["documents"], u["removed"]) for u in top] == [(FOOTER, 6, 5)]


@pytest.mark.parametrize(
    "unit, min_docs, n_units, n_ranges",
    [("line", 3, 5, 3), ("paragraph", 2, 3, 1), ("line", 5, 1, 4)],
)
def test_the_sharded_step_decides_what_the_in_memory_reference_decides(
    tmp_path, unit, min_docs, n_units, n_ranges
):
    rng = random.Random(min_docs)
    pool = [sentence(rng) for _ in range(60)]  # lines that recur across documents
    texts = []
    for _ in range(300):
        lines = [rng.choice(pool) if rng.random() < 0.4 else sentence(rng) for _ in range(8)]
        texts.append(("\n" if rng.random() < 0.5 else "\n\n").join(lines))
    ids = [f"doc-{rng.randrange(10**6):06d}-{i}" for i in range(300)]
    cfg = ParagraphDedupConfig(unit=unit, min_docs=min_docs)
    gone_rows = {0: [0, 3, 5]}  # documents the exact and near steps removed from read unit 0
    bounds, outputs = sharded(tmp_path, ids, texts, cfg, n_units, n_ranges, gone_rows)
    removed_ids = {ids[bounds[0][0] + r] for r in gone_rows[0]}
    kept = [i for i in range(300) if ids[i] not in removed_ids]
    expected = in_memory_paragraph_removals([ids[i] for i in kept], [texts[i] for i in kept], cfg)
    assert expected and len(expected) < len(kept)
    assert decisions(tmp_path, ids, outputs) == expected
