"""A mixture's DAG, planned without Ray: per-source instances of clean and tokenize, each keyed
on its own source; the weights reach sample_index and what is below it, and nothing above; a
bad mixture is one line before anything starts; the one-source shorthand is the DAG as
declared (its keys are pinned in test_pinned_cache_keys.py)."""

from __future__ import annotations

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.plan import make_plan
from lmforge.pipeline.engine.run_request import RunRequest, plan_for, run_local_checks
from lmforge.pipeline.engine.source_instances import base_name, for_config, source_of
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.sources.files import SourceError
from lmforge.pipeline.storage.artifact_store import ArtifactStore

UPSTREAM = ["clean[prose]", "clean[code]", "dedup_across", "train_tokenizer"]
UPSTREAM += ["tokenize[prose]", "tokenize[code]"]
DOWNSTREAM = ["sample_index", "pretrain", "harm", "perplexity", "sample", "report"]


def source(name: str, path, weight: float, extra: str = "") -> str:
    return f"{{name:{name},paths:[{path}],weight:{weight}{extra}}}"


@pytest.fixture
def files(tmp_path):
    for name in ("prose.jsonl", "code.jsonl", "math.jsonl"):
        (tmp_path / name).write_text('{"text": "x"}\n')
    return tmp_path


def keys(tmp_path, *sources: str, overrides=()) -> dict[str, str]:
    config = compose([f"workdir={tmp_path}", f"data.sources=[{','.join(sources)}]", *overrides])
    plan = make_plan(Dag(for_config(load_stages(), config)), config, ArtifactStore(tmp_path / "s"))
    return {name: plan.stages[name].key for name in plan.order}


def test_a_mixture_has_an_instance_of_clean_and_tokenize_per_source_and_the_step_across(files):
    found = keys(
        files, source("prose", files / "prose.jsonl", 1), source("code", files / "code.jsonl", 1)
    )
    assert list(found) == [*UPSTREAM[:4], *UPSTREAM[4:], *DOWNSTREAM]
    assert (base_name("tokenize[code]"), source_of("tokenize[code]")) == ("tokenize", "code")
    assert (base_name("pretrain"), source_of("pretrain")) == ("pretrain", "")


def test_without_sources_the_dag_is_the_declared_one_and_has_no_step_across(tmp_path):
    stages = Dag(for_config(load_stages(), compose([f"workdir={tmp_path}"]))).order
    assert "dedup_across" not in stages and "clean" in stages and "tokenize" in stages


def test_one_source_or_dedup_across_off_has_no_step_across(files):
    one = keys(files, source("prose", files / "prose.jsonl", 1))
    assert "dedup_across" not in one and "clean[prose]" in one
    two = [source("prose", files / "prose.jsonl", 1), source("code", files / "code.jsonl", 1)]
    assert "dedup_across" not in keys(files, *two, overrides=["data.dedup.across=false"])


def test_changing_only_the_weights_changes_sample_index_and_below_and_nothing_above(files):
    a = keys(
        files,
        source("prose", files / "prose.jsonl", 0.7),
        source("code", files / "code.jsonl", 0.3),
    )
    b = keys(
        files,
        source("prose", files / "prose.jsonl", 0.4),
        source("code", files / "code.jsonl", 0.6),
    )
    assert [n for n in a if a[n] == b[n]] == UPSTREAM
    assert [n for n in a if a[n] != b[n]] == DOWNSTREAM


def test_adding_a_source_keeps_the_others_cleaning_and_reruns_the_step_across(files):
    two = [source("prose", files / "prose.jsonl", 1), source("code", files / "code.jsonl", 1)]
    before = keys(files, *two)
    after = keys(files, *two, source("math", files / "math.jsonl", 1))
    assert after["clean[prose]"] == before["clean[prose]"]
    assert after["clean[code]"] == before["clean[code]"]
    assert after["dedup_across"] != before["dedup_across"]
    assert "clean[math]" in after and "tokenize[math]" in after


def test_the_tokenizer_weight_retrains_the_tokenizer_and_cleans_nothing(files):
    plain = keys(
        files, source("prose", files / "prose.jsonl", 1), source("code", files / "code.jsonl", 1)
    )
    weighted = keys(
        files,
        source("prose", files / "prose.jsonl", 1, ",tokenizer_weight:3"),
        source("code", files / "code.jsonl", 1),
    )
    assert weighted["clean[prose]"] == plain["clean[prose]"]
    assert weighted["dedup_across"] == plain["dedup_across"]
    assert weighted["train_tokenizer"] != plain["train_tokenizer"]


def test_the_order_of_the_sources_keys_the_step_across(files):
    prose, code = source("prose", files / "prose.jsonl", 1), source("code", files / "code.jsonl", 1)
    assert keys(files, prose, code)["dedup_across"] != keys(files, code, prose)["dedup_across"]


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        (
            ["{name:a,paths:[P],weight:0}", "{name:b,paths:[P],weight:1}"],
            "weight 0.0; a weight must be > 0",
        ),
        (["{name:a,paths:[P],weight:-1}", "{name:b,paths:[P],weight:1}"], "a weight must be > 0"),
        (["{name:a,paths:[],weight:1}", "{name:b,paths:[P],weight:1}"], "source 'a' has no paths"),
        (["{name:a,paths:[P],weight:1}", "{name:a,paths:[P],weight:1}"], "names two sources 'a'"),
        (["{paths:[P],weight:1}"], "needs a name"),
    ],
)
def test_a_bad_mixture_is_one_line_before_anything_runs(files, entries, said):
    listed = ",".join(e.replace("P", str(files / "prose.jsonl")) for e in entries)
    config = compose([f"workdir={files / 'runs'}", f"data.sources=[{listed}]"])
    with pytest.raises(ConfigError, match=said) as raised:
        plan_for(RunRequest(config=config))
    assert "\n" not in str(raised.value)


def test_paths_and_sources_together_are_one_line(files):
    config = compose(
        [
            f"workdir={files / 'runs'}",
            f"data.paths=[{files / 'code.jsonl'}]",
            f"data.sources=[{source('prose', files / 'prose.jsonl', 1)}]",
        ]
    )
    with pytest.raises(ConfigError, match="data.paths and data.sources are both set"):
        plan_for(RunRequest(config=config))


def test_a_source_whose_paths_match_no_file_is_named_before_anything_starts(files):
    missing = files / "nowhere" / "*.jsonl"
    listed = f"{source('prose', files / 'prose.jsonl', 1)},{source('code', missing, 1)}"
    config = compose([f"workdir={files / 'runs'}", f"data.sources=[{listed}]"])
    _, plan, _ = plan_for(RunRequest(config=config))
    with pytest.raises(SourceError, match="matches no file") as raised:
        run_local_checks(plan, config["cluster"])
    assert str(missing) in str(raised.value)
