"""`clean` on small real files: bad input is named or skipped and counted, nothing partial is
committed, documents are conserved, duplicates are traced to the document kept."""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest
from store_checks import leftovers

from lmforge.pipeline.sources.embedded import embedded_documents
from lmforge.pipeline.sources.files import SourceError

pytestmark = pytest.mark.slow  # each test runs `clean` as a Ray task, with its own MLflow run

TOPICS = [d.text for d in embedded_documents() if 1500 < len(d.text) < 30000 and "{" not in d.text]


def write_jsonl(path, texts):
    with open(path, "w", encoding="utf-8") as handle:
        for i, text in enumerate(texts):
            handle.write(json.dumps({"id": f"doc{i}", "text": text}) + "\n")
    return path


def truncated(codec: str, texts: list[str], keep: float) -> bytes:
    """`texts` as compressed JSONL (ids cut0, cut1...), cut after `keep` of its bytes."""
    import pyarrow as pa

    data = "".join(json.dumps({"id": f"cut{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, codec) as out:
        out.write(data.encode("utf-8"))
    whole = sink.getvalue().to_pybytes()
    return whole[: int(len(whole) * keep)]


@pytest.fixture
def good_jsonl(tmp_path):
    return write_jsonl(tmp_path / "good.jsonl", TOPICS[:50])


def paths(*files):
    """The override naming `files`, with a validation share that small corpora fill."""
    return "data.paths=[" + ",".join(str(f) for f in files) + "]", "data.val_fraction=0.3"


@pytest.mark.parametrize(
    "name, content, cause",
    [
        ("empty.txt", b"", "is empty"),
        ("binary.txt", b"\x7fELF\x00\x00\x01\x02" * 100, "looks binary"),
        ("corrupt.parquet", b"PAR1 this is not parquet", "corrupt or unreadable Parquet"),
        ("broken.jsonl", b'{"text": "ok"}\n{"text": oops\n', "not valid JSON"),
        ("cut.jsonl.zst", truncated("zstd", TOPICS[60:70], 0.9), "corrupt or truncated zstd"),
        ("cut.jsonl.gz", truncated("gzip", TOPICS[60:70], 0.9), "corrupt or truncated gzip"),
        ("big.txt", b"word " * 300_000, "over data.max_text_file_mb=1"),
    ],
)
def test_a_bad_file_fails_the_stage_naming_it_and_commits_nothing(
    run_stage, tmp_path, good_jsonl, name, content, cause
):
    bad = tmp_path / name
    bad.write_bytes(content)
    with pytest.raises(SourceError, match=cause) as info:
        run_stage("clean", [*paths(good_jsonl, bad), "data.max_text_file_mb=1"])
    assert name in str(info.value)
    assert leftovers(tmp_path / "store", "clean") == []  # no manifest, artifact or .tmp-* dir


def test_a_missing_path_is_named_and_commits_nothing(run_stage, tmp_path):
    with pytest.raises(SourceError, match="nowhere.txt"):
        run_stage("clean", [*paths(tmp_path / "nowhere.txt")])
    assert leftovers(tmp_path / "store", "clean") == []


def test_with_on_error_skip_bad_files_are_skipped_and_counted(run_stage, tmp_path, good_jsonl):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01" * 50)
    _, summary = run_stage(
        "clean",
        [*paths(good_jsonl, tmp_path / "empty.txt", tmp_path / "bin.txt"), "data.on_error=skip"],
    )
    assert summary["files_skipped"] == 2
    assert summary["docs_out"] > 0


def test_with_on_error_skip_a_file_broken_part_way_keeps_the_documents_before(
    run_stage, tmp_path, good_jsonl
):
    from lmforge.pipeline.sources.files import read_source

    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(truncated("gzip", [t * 40 for t in TOPICS[60:80]], 0.6))
    before = []
    with pytest.raises(SourceError):
        before.extend(d.id for d in read_source(str(cut)))
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * 300_000)
    artifact, summary = run_stage(
        "clean", [*paths(good_jsonl, cut, big), "data.on_error=skip", "data.max_text_file_mb=1"]
    )
    assert summary["files_skipped"] == 2
    assert 0 < summary["docs_before_file_errors"] == len(before) < 20
    assert summary["docs_in"] == 50 + len(before)
    excluded = pq.read_table(artifact / "excluded.parquet").to_pylist()
    kept = {r["id"] for p in artifact.glob("*-*.parquet") for r in pq.read_table(p).to_pylist()}
    duplicates = {r["id"] for r in pq.read_table(artifact / "duplicates.parquet").to_pylist()}
    assert set(before) <= kept | {r["id"] for r in excluded} | duplicates
    assert (
        "documents read before a file broke part-way are kept: "
        in (artifact / "datasheet.md").read_text()
    )


def test_invalid_utf8_is_repaired_or_dropped_and_counted(run_stage, tmp_path, good_jsonl):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(TOPICS[55].encode("utf-8") + " caf\xe9 cr\xe8me".encode("latin-1"))
    _, repaired = run_stage("clean", [*paths(good_jsonl, latin1)])
    assert repaired["filters"]["normalize"]["events"]["invalid_utf8_repaired"] == 1
    _, dropped = run_stage(
        "clean", [*paths(good_jsonl, latin1), "data.filters.normalize.on_invalid_utf8=drop"]
    )
    assert dropped["dropped_by_reason"]["invalid_utf8"] == 1


def test_a_fifty_megabyte_line_is_dropped_by_length_not_a_crash(run_stage, tmp_path, good_jsonl):
    huge = tmp_path / "huge.txt"
    huge.write_text("word " * 10_000_000, encoding="utf-8")
    _, summary = run_stage("clean", [*paths(good_jsonl, huge)])
    assert summary["dropped_by_reason"]["length_too_many_chars"] == 1


FOOTER = [
    "Found a bug in this page of the documentation? Report it on the tracker, and thank you.",
    "Last updated on October 7, and the history of every change is kept in the repository.",
    "Created using the documentation generator that the whole team has used for many years.",
    "All of the content of this site is available under the license that is named below it.",
    "Please read the guide to contributing before you send us a change to any of these pages.",
    "The source of this page is on the project's server, where anyone may propose an edit.",
]
"""Lines planted at the end of every document: boilerplate that paragraph dedup removes."""


def test_documents_in_equal_kept_plus_dropped_by_reason(run_stage, tmp_path):
    """Also: planted boilerplate lines stay in one document, a document made of nothing else is
    dropped with its reason, and the datasheet and `inspect` show what went."""
    from lmforge.pipeline.filters.dedup_paragraph import normalize_unit
    from lmforge.pipeline.stages.clean.paragraph_removal import most_repeated_units

    footer = "\n".join(FOOTER)
    texts = [f"{t}\n{footer.replace('7', str(i % 9))}" for i, t in enumerate(TOPICS[:49])]
    data = write_jsonl(tmp_path / "docs.jsonl", [*texts, footer])  # doc49: only boilerplate
    artifact, summary = run_stage("clean", [*paths(data)])
    dropped = sum(summary["dropped_by_reason"].values())
    assert summary["docs_in"] == summary["docs_out"] + dropped == 50
    rows = sum(pq.read_metadata(p).num_rows for p in artifact.glob("*-*.parquet"))
    assert rows == summary["docs_out"]
    excluded = pq.read_table(artifact / "excluded.parquet").to_pylist()
    duplicates = pq.read_table(artifact / "duplicates.parquet").to_pylist()
    assert len(excluded) + len(duplicates) == dropped

    kept = [r for p in artifact.glob("*-*.parquet") for r in pq.read_table(p).to_pylist()]
    holding = [r["id"] for r in kept if FOOTER[0] in r["text"]]
    assert len(holding) == 1 and summary["docs_out"] > 20, "kept once, in one document"
    assert all(FOOTER[1][:15] not in r["text"] for r in kept if r["id"] != holding[0])
    emptied = [r for r in excluded if r["id"] == "doc49"]
    assert [(r["step"], r["reason"]) for r in emptied] == [
        ("paragraph_dedup", "paragraph_dedup_empty")
    ]
    found = summary["paragraph_dedup"]
    assert found["docs_touched"] >= summary["docs_out"] and found["docs_dropped"] >= 1
    assert found["units_removed"] >= 6 * (summary["docs_out"] - 1)
    datasheet = (artifact / "datasheet.md").read_text()
    assert f"- repeated lines removed: {found['units_removed']} copies" in datasheet
    top = {normalize_unit(u["unit"]) for u in most_repeated_units(artifact, 6)}
    assert top == {normalize_unit(line) for line in FOOTER}


def test_planted_near_duplicates_are_removed_and_traced_to_the_kept_document(run_stage, tmp_path):
    rng = random.Random(0)
    originals = TOPICS[:40]
    copies = []
    for text in originals[:20]:
        words = text.split(" ")
        for i in rng.sample(range(len(words)), len(words) // 50):
            words[i] = "zebra"
        copies.append(" ".join(words) + "\nSubscribe to our newsletter for more updates today.")
    data = write_jsonl(tmp_path / "dups.jsonl", originals + copies)
    artifact, summary = run_stage("clean", [*paths(data)])
    duplicates = {
        r["id"]: r["kept_id"] for r in pq.read_table(artifact / "duplicates.parquet").to_pylist()
    }
    excluded = {r["id"] for r in pq.read_table(artifact / "excluded.parquet").to_pylist()}
    planted = {
        f"doc{40 + i}": f"doc{i}"
        for i in range(20)
        if f"doc{40 + i}" not in excluded and f"doc{i}" not in excluded
    }
    assert len(planted) >= 10, "the filter chain should let most planted pairs through"
    found = sum(
        duplicates.get(copy) == orig or duplicates.get(orig) == copy
        for copy, orig in planted.items()
    )
    assert found / len(planted) >= 0.9
    wrongly_merged = [d for d in duplicates if d not in planted and d not in planted.values()]
    assert len(wrongly_merged) <= 0.01 * len(originals) + 1e-9
    datasheet = (artifact / "datasheet.md").read_text()
    assert "near duplicates removed" in datasheet and "Known risks" in datasheet
    dedup_peak = max(
        summary["task_peak_rss_mb"][step] for step in ("exact", "near", "resolve", "paragraph")
    )
    assert dedup_peak > 0
    assert f"the largest dedup task peaked at {dedup_peak:g} MB" in datasheet


def test_parquet_and_datasets_sources_keep_ids_sources_and_metadata(run_stage, tmp_path):
    import datasets
    import pyarrow as pa

    rows = [
        {"id": f"p{i}", "body": t, "url": f"https://example.org/{i}"}
        for i, t in enumerate(TOPICS[:30])
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "docs.parquet")
    datasets.Dataset.from_list(
        [{"id": f"h{i}", "body": t} for i, t in enumerate(TOPICS[30:60])]
    ).save_to_disk(str(tmp_path / "hfdata"))
    artifact, summary = run_stage(
        "clean",
        [
            f"data.paths=[{tmp_path / 'docs.parquet'},hf:{tmp_path / 'hfdata'}]",
            "data.text_field=body",
            "data.val_fraction=0.3",
        ],
    )
    assert summary["docs_in"] == 60
    shards = sorted(artifact.glob("t*-*.parquet")) + sorted(artifact.glob("val-*.parquet"))
    kept = [
        r for p in shards for r in pq.read_table(p, columns=["id", "source", "meta"]).to_pylist()
    ]
    by_id = {r["id"]: r for r in kept}
    parquet_rows = [r for r in kept if r["id"].startswith("p")]
    assert parquet_rows and all(r["source"].endswith("docs.parquet") for r in parquet_rows)
    assert all(json.loads(r["meta"])["url"].startswith("https://") for r in parquet_rows)
    assert any(i.startswith("h") and by_id[i]["source"].startswith("hf:") for i in by_id)


def test_a_big_jsonl_file_is_read_by_several_tasks_as_if_read_whole(run_stage, tmp_path):
    """Byte ranges of one file go to >= 4 tasks; the shards hold what a one-task read's hold, are
    cut near data.shard_mb across the tasks, and the coordinator itself reads a small part of
    the input."""
    rng = random.Random(1)
    words = [w for t in TOPICS * 8 for w in rng.sample(t.split(" "), len(t.split(" ")))]
    texts = [" ".join(words[i : i + 2000]) for i in range(0, len(words), 2000)]
    data = tmp_path / "big.jsonl"  # records without ids: ids are `<file>#<line>`
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    size_mb = data.stat().st_size / 2**20

    def shards(artifact):
        rows = [r for p in artifact.glob("*-*.parquet") for r in pq.read_table(p).to_pylist()]
        return sorted((r["id"], r["split"], r["text"]) for r in rows)

    target = 0.1
    sizes = [*paths(data), f"data.shard_mb={target}"]
    whole, one = run_stage("clean", [*sizes, "data.read_split_mb=64"])
    split, many = run_stage("clean", [*sizes, f"data.read_split_mb={size_mb / 5:.4f}"])
    assert one["read_units"] == 1 and many["read_units"] >= 4
    assert many["docs_in"] == one["docs_in"] == len(texts)
    assert shards(split) == shards(whole) and len(shards(whole)) > len(texts) / 2
    assert f"{data}#1" in {row[0] for row in shards(whole)}
    assert many["dropped_by_reason"] == one["dropped_by_reason"]
    assert many["coordinator_read_mb"] < size_mb / 4
    for split_name in ("train", "val"):
        files = sorted(split.glob(f"{split_name}-*.parquet"))
        inner = [f.stat().st_size / 2**20 for f in files[:-1]]  # the last of a split aside
        near = [abs(mb - target) <= 0.25 * target for mb in inner]
        assert inner and sum(near) >= 0.9 * len(near), (split_name, inner)


def test_each_step_reports_its_tasks_peak_their_rise_over_the_workers_start_and_its_time(
    run_stage, good_jsonl
):
    _, summary = run_stage("clean", [*paths(good_jsonl)])
    peaks, rises = summary["task_peak_rss_mb"], summary["task_rss_rise_mb"]
    steps = {"filter", "exact", "near", "resolve", "paragraph", "split", "shard"}
    assert set(peaks) == set(rises) >= steps
    for step, peak in peaks.items():
        assert peak > 50  # a Python process with numpy and pyarrow
        assert 0 <= rises[step] < peak  # the worker's start (imports at least) left out
    seconds = summary["step_seconds"]  # where the stage's time went, step by step
    assert set(seconds) == steps
    assert all(t > 0 for t in seconds.values())
