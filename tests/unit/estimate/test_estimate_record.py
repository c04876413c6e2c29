"""What a finished stage records next to its estimate (the manifest's `estimate` entry)."""

from __future__ import annotations

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.estimate.cost_model import Cluster
from lmforge.pipeline.estimate.measured import metrics, stage_record, upstream_view

CLEAN_SUMMARY = {
    "docs_in": 882,
    "docs_out": 647,
    "read_units": 1,
    "dropped_by_reason": {"exact_duplicate": 5, "near_duplicate": 19, "gopher_too_few_words": 9},
    "filters": {"normalize": {"chars_in": 1_059_324}, "c4": {"chars_in": 765_151}},
    "coordinator_peak_rss_mb": 285.4,
    "task_peak_rss_mb": {
        "filter": 347.6,
        "exact": 346.3,
        "near": 346.5,
        "resolve": 346.4,
        "shard": 357.9,
        "split": 353.5,
    },
}


def record(summary, stage="clean", tmp_path=None, process_mb=300.0):
    return stage_record(
        stage=stage,
        sections={"data": compose()["data"]},
        summary=summary,
        input_manifests={},
        measured_s=9.6,
        process_peak_mb=process_mb,
        cluster=Cluster(nodes=1, cpus_per_node=2),
        workdir=tmp_path,
    )


def test_a_stage_records_predicted_and_measured_time_and_peak_memory(tmp_path):
    entry = record(CLEAN_SUMMARY, tmp_path=tmp_path)
    for key in ("predicted_s", "measured_s", "predicted_peak_rss_mb", "measured_peak_rss_mb"):
        assert entry[key] > 0, key
    assert entry["measured_s"] == 9.6
    assert entry["measured_peak_rss_mb"] == 357.9  # the largest task, not the stage process
    assert entry["measured"]["shard_task_rss_mb"] == 357.9
    assert entry["measured"]["coordinator_rss_mb"] == 300.0
    assert entry["size"]["docs"] == 882 and entry["size"]["bytes"] == 1_059_324
    assert entry["size"]["keep_fraction"] == 647 / 882
    assert entry["size"]["duplicate_fraction"] == 24 / 882


def test_a_cost_model_that_cannot_read_the_summary_is_reported_not_raised(tmp_path):
    entry = record({"unexpected": 1}, tmp_path=tmp_path)
    assert entry["measured_s"] == 9.6 and entry["measured_peak_rss_mb"] == 300.0
    assert "KeyError" in entry["error"] and "predicted_s" not in entry


def test_the_record_becomes_mlflow_metrics_without_its_nested_parts(tmp_path):
    entry = record(CLEAN_SUMMARY, tmp_path=tmp_path)
    found = metrics(entry)
    assert found["estimate_predicted_s"] == entry["predicted_s"]
    assert found["estimate_measured_peak_rss_mb"] == 357.9
    assert not any(k.endswith(("size", "measured", "coefficients")) for k in found)


def test_downstream_stages_read_their_inputs_sizes_from_the_inputs_records():
    manifests = {
        "pretrain": {"summary": {"tokens": 10}, "estimate": {"size": {"params": 1e6}}},
        "clean": {"summary": {"docs_out": 5}},
    }
    view = upstream_view(manifests)
    assert view == {"pretrain": {"tokens": 10, "params": 1e6}, "clean": {"docs_out": 5}}
