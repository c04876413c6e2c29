"""What `lmforge run` prints when it ends: the report's headline above the model card's path,
read from the report's manifest; a report without one (cached by an older release) prints none."""

from __future__ import annotations

import json

import pytest

from lmforge.pipeline.cli.commands import _finish
from lmforge.pipeline.engine.run_records import PipelineRecord, StageRecord
from lmforge.pipeline.engine.workdir import Workdir
from lmforge.pipeline.storage.artifact_store import MANIFEST, open_store
from lmforge.pipeline.storage.settings import StoreSettings

KEY = "0123456789abcdef"


@pytest.fixture
def finished(tmp_path):
    """A workdir whose store holds a committed report artifact, and the run's record."""
    workdir = Workdir(tmp_path)
    store = open_store(None, tmp_path, StoreSettings.defaults(tmp_path))
    artifact = store.path("report", KEY)
    artifact.mkdir(parents=True)
    record = PipelineRecord(run_id="r", command="run", state="finished")
    record.stages.append(StageRecord("report", KEY, state="ran", artifact=str(artifact)))
    config = {"workdir": str(tmp_path), "cluster": {}}

    def write(summary: dict) -> None:
        (artifact / MANIFEST).write_text(json.dumps({"summary": summary}), encoding="utf-8")

    return workdir, record, config, write


def test_the_run_ends_with_the_headline_above_the_model_card(finished, capsys):
    workdir, record, config, write = finished
    write({"headline": ["val perplexity 60.6", "beats the add-k bigram (144.3)"]})
    assert _finish(record, workdir, config) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("model: val perplexity 60.6")
    assert out[at + 1] == "       beats the add-k bigram (144.3)"
    assert out[at + 2].startswith("model card: ") and out[at + 2].endswith("/model_card.md")


def test_a_report_without_a_headline_prints_the_model_card_alone(finished, capsys):
    workdir, record, config, write = finished
    write({"model_card": "model_card.md"})
    assert _finish(record, workdir, config) == 0
    out = capsys.readouterr().out
    assert "model:" not in out and "model card: " in out
