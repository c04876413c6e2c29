"""A run on a local runtime names a data path that matches no file before it starts MLflow or
Ray (and before its workdir exists); a cluster's paths are left to `clean`, on the cluster. The
check is the clean stage's declared `local_check`, which the engine runs without knowing it."""

from __future__ import annotations

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.run_request import RunRequest, plan_for, run_local_checks
from lmforge.pipeline.engine.runner import run_pipeline
from lmforge.pipeline.sources.files import SourceError, check_paths_match


def _plan(tmp_path, *overrides: str):
    config = compose([f"workdir={tmp_path / 'runs'}", *overrides])
    _, plan, _ = plan_for(RunRequest(config=config, until="clean"))
    return plan, config


def test_a_missing_path_fails_the_run_before_anything_starts(tmp_path):
    missing = tmp_path / "nowhere" / "*.jsonl"
    config = compose([f"workdir={tmp_path / 'runs'}", f"data.paths=[{missing}]"])
    with pytest.raises(SourceError, match="matches no file; check data.paths") as raised:
        run_pipeline(RunRequest(config=config, until="clean"))
    assert str(missing) in str(raised.value)
    assert not (tmp_path / "runs").exists(), "no workdir, MLflow store or Ray token was made"


def test_every_pattern_needs_one_match_and_dataset_references_are_left_to_clean(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "b.txt").write_text("y")
    check_paths_match([str(tmp_path / "*.jsonl"), str(tmp_path / "deep" / "**" / "*.txt")])
    check_paths_match(["hf:some/dataset"])
    with pytest.raises(SourceError, match=r"\*\.parquet"):
        check_paths_match([str(tmp_path / "*.jsonl"), str(tmp_path / "*.parquet")])


def test_a_cluster_run_or_a_cached_clean_checks_nothing_here(tmp_path):
    missing = str(tmp_path / "only-on-the-cluster.jsonl")
    plan, config = _plan(tmp_path, f"data.paths=[{missing}]")
    with pytest.raises(SourceError):
        run_local_checks(plan, config["cluster"])
    run_local_checks(plan, {**config["cluster"], "ray_address": "ray://head:10001"})
    plan.stages["clean"].action = "cached"
    run_local_checks(plan, config["cluster"])


def test_the_check_is_the_clean_stages_own_declaration():
    from lmforge.pipeline.engine.execute import load_stages
    from lmforge.pipeline.stages.clean.stage import check_paths

    checks = {name: spec.local_check for name, spec in load_stages().items()}
    assert checks.pop("clean") is check_paths
    assert set(checks.values()) == {None}, "only clean checks before the run starts"
