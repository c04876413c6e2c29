"""A two-source mixture of the embedded corpus on real Ray, DeepSpeed and MLflow: changing only
the weights reruns exactly sample_index, pretrain and the evaluation (nothing is cleaned or
tokenized again), the shares drawn are the weights to within a point, a document repeated across
the sources is kept once, by the earlier-listed source, and the model card reports each source.

The first run stops after sample_index (`--until`): one training run, not two. That every stage
below sample_index changes its key with the weights, and none above it, is planned without Ray
in tests/unit/engine/test_source_instances.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import SMALL_MODEL, lmforge_here, status, summary

pytestmark = [pytest.mark.integration, pytest.mark.shares_ray, pytest.mark.timeout(900)]

QUICK = [
    *SMALL_MODEL,
    "train.max_steps=6",
    "train.checkpoint_every=6",
    "train.sequence_unlikelihood_steps=2",
    "train.num_workers=1",  # one training rank: the mixture is in the index, not the ranks
    "train.local_mode=true",  # in the stage's own task
    "eval.perplexity.max_tokens=2048",
    "eval.perplexity.max_documents=4",
    "eval.perplexity.bootstrap_samples=50",
    "eval.sample.max_new_tokens=8",
    "eval.harm.num_prompts=2",
    "eval.harm.bias_samples=0",
    "eval.harm.pii_samples=2",
    "eval.harm.extraction_prefixes=2",
    "data.val_fraction=0.3",
    "data.filters.language.enabled=false",  # the filters' models are not what this is about
    "data.filters.toxicity.enabled=false",
]
UPSTREAM = {"clean[prose]", "clean[code]", "dedup_across", "train_tokenizer"}
UPSTREAM |= {"tokenize[prose]", "tokenize[code]"}
DOWNSTREAM = {"sample_index", "pretrain", "perplexity", "sample", "harm", "report"}
SHARED = 2
"""Documents of the first source that the second repeats word for word."""


def two_sources(directory: Path) -> tuple[Path, Path]:
    """40 documents of the embedded corpus as two JSONL files, the second also holding
    `SHARED` of the first's documents under ids of its own."""
    from lmforge.pipeline.sources.embedded import embedded_documents

    texts = [d.text for d in embedded_documents() if 1500 < len(d.text) < 30000][:40]
    prose, code = directory / "prose.jsonl", directory / "code.jsonl"
    rows = {prose: texts[:20], code: texts[20:] + texts[:SHARED]}
    for path, part in rows.items():
        lines = [json.dumps({"id": f"{path.stem}{i}", "text": t}) for i, t in enumerate(part)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return prose, code


def mixture(prose: Path, code: Path, weights: tuple[float, float]) -> str:
    return (
        f"data.sources=[{{name:prose,paths:[{prose}],weight:{weights[0]}}},"
        f"{{name:code,paths:[{code}],weight:{weights[1]}}}]"
    )


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixture")
    prose, code = two_sources(root)
    workdir = root / "runs"
    runs = []
    for weights, until in (((0.7, 0.3), ["--until", "sample_index"]), ((0.4, 0.6), [])):
        sources = mixture(prose, code, weights)
        lmforge_here("run", *until, *QUICK, sources, f"workdir={workdir}")
        runs.append((weights, status(workdir), summary(workdir, "sample_index")))
    return workdir, runs


def test_changing_only_the_weights_reruns_the_index_training_and_evaluation(two_runs):
    _, ((_, first, _), (_, second, _)) = two_runs
    assert {n: s["state"] for n, s in first.items()} == {
        n: "ran" for n in UPSTREAM | {"sample_index"}
    }
    states = {n: s["state"] for n, s in second.items()}
    assert states == {**{n: "cached" for n in UPSTREAM}, **{n: "ran" for n in DOWNSTREAM}}
    for name in UPSTREAM:
        assert first[name]["key"] == second[name]["key"]
    assert first["sample_index"]["key"] != second["sample_index"]["key"]


def test_the_shares_drawn_are_the_weights_and_the_card_reports_each_source(two_runs):
    workdir, runs = two_runs
    for weights, _, index in runs:
        drawn = {part["source"]: part["share_drawn"] for part in index["mixture"]}
        asked = dict(zip(("prose", "code"), (w / sum(weights) for w in weights), strict=True))
        assert drawn.keys() == asked.keys()
        for source, share in asked.items():
            assert abs(drawn[source] - share) <= 0.01, (source, drawn, asked)
    card = (Path(status(workdir)["report"]["artifact"]) / "model_card.md").read_text()
    assert "| prose |" in card and "| code |" in card and "share drawn" in card
    across = summary(workdir, "dedup_across")
    assert across["sources"]["code"]["removed"] == SHARED
    assert across["sources"]["prose"]["removed"] == 0
    inspected = lmforge_here("inspect", "clean", f"workdir={workdir}").stdout
    assert "# clean[prose]" in inspected and "# clean[code]" in inspected
    perplexity = summary(workdir, "perplexity")
    assert set(perplexity["sources"]) == {"prose", "code"}
    assert perplexity["mix_weights"] == pytest.approx({"prose": 0.4, "code": 0.6})
