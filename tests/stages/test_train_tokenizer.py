"""`train_tokenizer` on a real clean artifact: it trains on a sample of `tokenizer.sample_bytes`
and says so in its summary and in MLflow."""

from __future__ import annotations

import json

from lmforge.pipeline.engine.tracking import client
from lmforge.pipeline.sources.embedded import embedded_documents

TEXTS = [d.text for d in embedded_documents() if 1500 < len(d.text) < 30000][:80]


def test_the_stage_trains_on_a_sample_and_records_its_size(run_stage, tmp_path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"doc{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)),
        encoding="utf-8",
    )
    clean, _ = run_stage("clean", [f"data.paths=[{corpus}]", "data.val_fraction=0.2"])
    _, everything = run_stage("train_tokenizer", ["tokenizer.vocab_size=512"], {"clean": clean})
    assert everything["sample_docs"] == everything["train_docs"] > 0
    assert everything["sample_text_bytes"] == everything["train_text_bytes"]
    budget = everything["train_text_bytes"] // 3
    overrides = ["tokenizer.vocab_size=512", f"tokenizer.sample_bytes={budget}"]
    artifact, sampled = run_stage("train_tokenizer", overrides, {"clean": clean})
    assert 0 < sampled["sample_docs"] < sampled["train_docs"] == everything["train_docs"]
    assert 0.5 * budget < sampled["sample_text_bytes"] < 1.5 * budget
    manifest = json.loads((artifact / "manifest.json").read_text(encoding="utf-8"))
    run = client(run_stage.tracking_uri).get_run(manifest["mlflow_run_id"])
    assert run.data.metrics["sample_text_bytes"] == sampled["sample_text_bytes"]
    assert (artifact / "tokenizer.json").is_file()
