"""A sweep's pure logic: its grid and draws, Hydra's parsing of sweep values, what it refuses
before anything starts, ASHA's settings and decisions, the summary's order and the progress."""

from __future__ import annotations

import math

import pytest

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.sweep.early_stop import EarlyStopper, asha_settings
from lmforge.pipeline.sweep.grid import SweptKey, Variant, expand, split_overrides, sweep_id
from lmforge.pipeline.sweep.progress import eta_seconds, progress_line
from lmforge.pipeline.sweep.records import SweepRecord, VariantRecord
from lmforge.pipeline.sweep.summary import rows, shared_stages, sorted_variants, table
from lmforge.pipeline.sweep.validation import check_swept_keys


def test_swept_values_are_parsed_as_hydra_parses_them_commas_in_lists_stay_in_a_value():
    shared, swept = split_overrides(
        ["preset=tiny", "train.lr=1e-3,3e-3", "data.paths=[a,b],[c]", "model.n_layer=range(2,4)"]
    )
    assert shared == ["preset=tiny"]
    assert swept == [
        SweptKey("train.lr", ("0.001", "0.003")),
        SweptKey("data.paths", ("[a,b]", "[c]")),
        SweptKey("model.n_layer", ("2", "3")),
    ]


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("train.lr=choice()", "bad sweep override"),
        ("train.lr=[1,2", "bad sweep override"),
        ("+train.extra=1,2", "sweep an existing key"),
    ],
)
def test_a_bad_sweep_override_is_one_line_naming_it(override, says):
    with pytest.raises(ConfigError, match=says):
        split_overrides([override])


def test_a_key_swept_twice_is_refused():
    with pytest.raises(ConfigError, match="swept twice"):
        split_overrides(["train.lr=1,2", "train.lr=3,4"])


def test_the_grid_is_every_combination_first_key_slowest_each_named_by_its_place():
    _, swept = split_overrides(["train.lr=1e-3,3e-3", "model.d_model=32,64"])
    variants = expand(swept)
    assert [v.name for v in variants] == ["v0", "v1", "v2", "v3"]
    assert [tuple(v.params.values()) for v in variants] == [
        ("0.001", "32"), ("0.001", "64"), ("0.003", "32"), ("0.003", "64"),
    ]  # fmt: skip
    assert variants[3].overrides() == ["train.lr=0.003", "model.d_model=64"]


def test_random_draws_are_without_replacement_seeded_and_keep_grid_names():
    _, swept = split_overrides(["train.lr=1,2,3,4", "model.d_model=32,64,128"])
    drawn = expand(swept, draws=5, seed=3)
    assert len({v.name for v in drawn}) == 5
    assert drawn == expand(swept, draws=5, seed=3)
    grid = {v.name: v.params for v in expand(swept)}
    assert all(grid[v.name] == v.params for v in drawn)
    assert len(expand(swept, draws=12, seed=0)) == 12


@pytest.mark.parametrize(("draws", "says"), [(0, "at least one"), (13, "more than the 12")])
def test_impossible_draws_are_refused(draws, says):
    _, swept = split_overrides(["train.lr=1,2,3,4", "model.d_model=32,64,128"])
    with pytest.raises(ConfigError, match=says):
        expand(swept, draws=draws)


def test_nothing_to_sweep_is_an_empty_grid():
    with pytest.raises(ConfigError, match="nothing to sweep"):
        expand(split_overrides(["train.lr=1e-3"])[1])


def test_a_key_no_stage_reads_is_refused_and_keys_stages_read_pass():
    with pytest.raises(ConfigError, match="no stage reads cluster.num_cpus"):
        check_swept_keys([Variant("v0", {"cluster.num_cpus": "1"})])
    check_swept_keys([Variant("v0", {"train.lr": "1", "eval.perplexity.max_tokens": "5"})])
    check_swept_keys([Variant("v0", {"preset": "tiny"})])  # a config group


def test_the_same_sweep_asked_again_has_the_same_id_whatever_the_workdir():
    variants = [Variant("v0", {"train.lr": "1"}), Variant("v1", {"train.lr": "2"})]
    one = sweep_id(["preset=tiny", "workdir=/a"], variants, False)
    assert one == sweep_id(["workdir=/b", "preset=tiny"], variants, False)
    assert one != sweep_id(["preset=tiny"], variants, True)
    assert one != sweep_id(["preset=tiny"], variants[:1], False)


def test_asha_settings_default_to_a_tenth_of_the_run_and_two_evaluations_of_grace():
    settings = asha_settings(max_steps=400)
    assert (settings.eval_every, settings.grace_period, settings.reduction_factor) == (40, 80, 2)
    assert asha_settings(400, eval_every=25, grace_period=50, reduction_factor=3).grace_period == 50
    for bad in (
        {"grace_period": 500},
        {"grace_period": 10, "eval_every": 20},
        {"reduction_factor": 1},
    ):
        with pytest.raises(ConfigError):
            asha_settings(400, **bad)


def test_asha_stops_the_worse_variant_at_a_rung_and_a_diverging_loss_ranks_last():
    stopper = EarlyStopper(asha_settings(max_steps=40, eval_every=4))  # rungs at 8, 16, 32
    assert not stopper.report("good", 4, 3.0)
    assert not stopper.report("good", 8, 2.9)  # the first at the rung
    assert not stopper.report("nan", 4, math.nan)
    assert stopper.report("nan", 8, math.nan)
    assert not stopper.report("good", 8, 2.0)  # a step reported twice counts once


def _record() -> SweepRecord:
    def variant(name, lr, ppl, stages, state="finished"):
        v = VariantRecord(name, {"train.lr": lr}, state=state, started_at=0.0, finished_at=10.0)
        v.metrics = {"val_perplexity": ppl}
        v.stages = stages
        return v

    shared = {"clean": "c1", "tokenize": "t1"}
    return SweepRecord(
        sweep_id="sweep-x",
        command="lmforge sweep train.lr=1,2,3",
        swept=["train.lr"],
        variants=[
            variant("v0", "1", 30.0, {**shared, "pretrain": "p0"}),
            variant("v1", "2", None, {**shared, "pretrain": "p1"}, state="failed"),
            variant("v2", "3", 12.5, {**shared, "pretrain": "p2"}, state="stopped"),
        ],
    )


def test_the_summary_sorts_by_the_metric_lowest_first_variants_without_it_last():
    record = _record()
    assert [v.variant for v in sorted_variants(record)] == ["v2", "v0", "v1"]
    first = rows(record)[0]
    assert first["variant"] == "v2" and first["state"] == "stopped"
    assert set(first) >= {"variant", "params", "state", "metrics", "stages"}
    assert first["metrics"]["val_perplexity"] == 12.5 and first["metrics"]["wall_s"] == 10.0
    assert shared_stages(record, record.variants[0]) == 2
    lines = table(record).splitlines()
    assert lines[3].split()[:3] == ["train.lr", "variant", "state"]
    assert [line.split()[1] for line in lines[4:7]] == ["v2", "v0", "v1"]


def test_progress_counts_and_eta_from_finished_variants():
    assert eta_seconds([], [5.0], 3, 2) is None
    assert eta_seconds([100.0, 200.0], [50.0], pending=2, slots=2) == pytest.approx(200.0)
    line = progress_line("sweep-x", 1, 1, 0, 1, 2, 125.0)
    assert line == "sweep-x: 2/5 done (1 stopped early), 1 running, 2 pending, ETA 2m05s"


def test_a_sweep_left_running_by_a_gone_driver_reads_as_killed_and_a_live_ones_as_running(
    tmp_path,
):
    from dead_driver import dead_driver

    from lmforge.pipeline.engine.driver import this_driver
    from lmforge.pipeline.sweep.records import SweepBook

    book = SweepBook(tmp_path / "sweeps")
    for name, driver in (("sweep-dead", dead_driver()), ("sweep-live", this_driver())):
        book.save(
            SweepRecord(
                sweep_id=name,
                command="sweep",
                swept=["train.lr"],
                driver=driver,
                variants=[
                    VariantRecord("v0", {"train.lr": "1"}, state="finished"),
                    VariantRecord("v1", {"train.lr": "2"}, state="running"),
                ],
            )
        )
    dead, live = book.find("sweep-dead"), book.find("sweep-live")
    assert dead.state == "killed"
    assert [v.state for v in dead.variants] == ["finished", "killed"]
    assert live.state == "running"
    assert [v.state for v in live.variants] == ["finished", "running"]
    unnamed = SweepRecord.from_dict({"sweep_id": "old", "command": "sweep", "swept": []})
    assert unnamed.state == "running", "a record naming no driver is left as it says"


def test_sweep_until_an_unknown_stage_is_one_line_before_anything_runs(tmp_path, capsys):
    from lmforge.pipeline.cli.main import main

    code = main(["sweep", "train.lr=1e-3,3e-3", "--until", "pretrian", f"workdir={tmp_path}"])
    assert code != 0
    error = capsys.readouterr().err.strip()
    assert error.startswith("lmforge: error:") and "'pretrian'" in error and "\n" not in error
    assert not (tmp_path / "sweeps").exists()


def test_a_variant_that_fails_on_an_unexpected_error_is_failed_and_its_slot_goes_on(
    tmp_path, monkeypatch
):
    """A fault of ours inside one variant (not an LmforgeError) fails that variant alone: it is
    recorded failed with the error's type, and the slot runs the next variant."""
    from lmforge.pipeline.errors import LmforgeError
    from lmforge.pipeline.sweep import driver

    shared, swept = split_overrides(["preset=tiny", f"workdir={tmp_path}", "train.lr=1e-3,3e-3"])
    options = driver.SweepOptions(command="sweep", max_concurrent=1)
    sweep = driver._Sweep(shared, expand(swept), options)
    ran = []

    def pipeline(self, planned, overrides, variant):
        ran.append(variant.variant)
        if variant.variant == "v0":
            raise FileNotFoundError("owner.json")  # a race of ours, as seen once
        raise LmforgeError("stage pretrain failed")

    monkeypatch.setattr(driver._Sweep, "_pipeline", pipeline)
    sweep.record = sweep._open_record()
    sweep._run_variants([p for p in sweep.planned])
    states = {v.variant: (v.state, v.error) for v in sweep.record.variants}
    assert ran == ["v0", "v1"]
    assert states == {
        "v0": ("failed", "FileNotFoundError: owner.json"),
        "v1": ("failed", "stage pretrain failed"),
    }


def test_asha_counts_every_figure_of_a_variant_trained_between_two_looks(tmp_path):
    """One variant at a time: the first trains and commits between two looks of the watch (a
    short run), so its figures are read from its committed model; the second, as bad at every
    rung, is stopped at the first rung against them."""
    import json

    from lmforge.pipeline.engine.run_records import PipelineRecord, StageRecord
    from lmforge.pipeline.engine.tracking import client
    from lmforge.pipeline.sweep.asha_watch import AshaWatch

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    config = {"cluster": {}}
    trained = tmp_path / "store" / "pretrain" / "p-good"
    trained.mkdir(parents=True)
    (trained / "manifest.json").write_text(json.dumps({"key": "p-good"}))
    losses = [[step, 5.0 - step / 10] for step in (4, 8, 12, 16, 20)]
    (trained / "training_summary.json").write_text(json.dumps({"val_losses": losses}))
    mlflow = client(uri)
    bad_run = mlflow.create_run(mlflow.create_experiment("asha")).info.run_id
    for step in (4, 8):
        mlflow.log_metric(bad_run, "val_loss", 9.0, step=step)

    record = SweepRecord(
        sweep_id="sweep-x",
        command="sweep",
        swept=["train.lr"],
        variants=[VariantRecord("good", {"train.lr": "1e-3"}), VariantRecord("bad", {})],
    )
    live = {
        "good": PipelineRecord("r1", "sweep", stages=[StageRecord("pretrain", "p-good", "ran")]),
        "bad": PipelineRecord(
            "r2", "sweep", stages=[StageRecord("pretrain", "p-bad", "running", None, bad_run)]
        ),
    }
    watch = AshaWatch(EarlyStopper(asha_settings(20, eval_every=4)), uri, config, tmp_path)
    assert watch.look(record, live) == ["bad"]
    assert record.variant("bad").stop_requested_at == 8
