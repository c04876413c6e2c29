"""Fitting coefficients to measured runs, and the coefficients file."""

from __future__ import annotations

import json

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.estimate.calibrate import fit_stage
from lmforge.pipeline.estimate.calibration.store_samples import samples_from_store
from lmforge.pipeline.estimate.coefficients import load_coefficients, write_coefficients
from lmforge.pipeline.estimate.cost_model import Cluster, evaluate
from lmforge.pipeline.estimate.stage_costs import cost_models
from lmforge.pipeline.stages.clean import cost as clean_cost

TRUTH = {
    "fixed_s": 8.0,
    "cpu_s_per_doc": 2e-5,
    "cpu_s_per_byte": 4e-8,
    "filter_cpu_s_per_byte": 3e-6,
    "coordinator_mb": 290.0,
    "coordinator_mb_per_unit": 2.0,
}
PREVIOUS = {k: v * 3 for k, v in TRUTH.items()}


def clean_samples(sizes, chain_on: float) -> list[dict]:
    """Samples whose measured values are the cost model's own, with TRUTH coefficients."""
    data = compose()["data"]
    samples = []
    for docs, per_doc in sizes:
        size = clean_cost._size(data, docs, docs * per_doc, Cluster(1, 2).as_size())
        size |= {"keep_fraction": 0.75, "duplicate_fraction": 0.25, "chain_on": chain_on}
        forms = clean_cost.cost(size).measures()
        measured = {m: evaluate(forms[m], TRUTH, "clean") for m in ("wall_s", "coordinator_rss_mb")}
        samples.append({"stage": "clean", "size": size, "measured": measured})
    return samples


SIZES = [(20_000, 200), (60_000, 200), (20_000, 800), (200_000, 5000), (100_000, 2000)]


def test_the_fit_recovers_the_coefficients_that_made_the_measurements():
    samples = clean_samples(SIZES, 0.0) + clean_samples(SIZES[:3], 1.0)
    fitted = fit_stage("clean", samples, PREVIOUS)
    for name, value in TRUTH.items():
        assert fitted[name] == pytest.approx(value, rel=0.05), name


def test_a_coefficient_the_samples_cannot_see_keeps_its_previous_value():
    fitted = fit_stage("clean", clean_samples(SIZES, 0.0), PREVIOUS)
    assert fitted["filter_cpu_s_per_byte"] == pytest.approx(PREVIOUS["filter_cpu_s_per_byte"])
    assert fitted["cpu_s_per_doc"] == pytest.approx(TRUTH["cpu_s_per_doc"], rel=0.05)


def test_coefficients_are_written_whole_and_read_back(tmp_path):
    path = tmp_path / "estimate" / "coefficients.json"
    samples = [{"stage": "clean"}, {"stage": "clean"}, {"stage": "pretrain"}]
    write_coefficients(path, {"clean": TRUTH}, samples, "lmforge estimate --calibrate")
    data = load_coefficients(path)
    assert data["stages"]["clean"] == TRUTH
    assert data["fitted_on"]["samples"] == {"clean": 2, "pretrain": 1}
    assert data["fitted_on"]["command"] == "lmforge estimate --calibrate"
    assert not list(path.parent.glob("*.partial"))


def test_a_file_of_another_format_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"format": 99, "stages": {}}))
    with pytest.raises(ConfigError, match="--calibrate"):
        load_coefficients(path)
    with pytest.raises(ConfigError, match="no estimate coefficients"):
        load_coefficients(tmp_path / "missing.json")


def test_every_recorded_stage_run_becomes_a_sample(tmp_path):
    record = {
        "measured_s": 12.5,
        "measured_artifact_bytes": 4096,
        "size": {"docs": 10},
        "measured": {"coordinator_rss_mb": 300.0},
    }
    for stage, entry in (("clean", record), ("report", None)):
        folder = tmp_path / stage / "abc"
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({"stage": stage, "estimate": entry}))
    samples = samples_from_store(tmp_path)
    assert len(samples) == 1
    assert samples[0]["stage"] == "clean"
    assert samples[0]["measured"] == {
        "wall_s": 12.5,
        "coordinator_rss_mb": 300.0,
        "store_bytes": 4096,
    }


def test_every_cost_model_can_be_fitted_from_its_own_predictions():
    from lmforge.pipeline.estimate.coefficients import shipped_coefficients

    shipped = load_coefficients(shipped_coefficients())["stages"]
    for name in cost_models():
        assert set(shipped[name]) >= _coefficient_names(name), name


def _coefficient_names(stage: str) -> set[str]:
    """Every fitted coefficient a stage's cost model can use."""
    from lmforge.pipeline.cli.estimate import BYTES_PER_DOC

    config = compose()
    flow = {"docs": 1e6, "bytes": 1e6 * BYTES_PER_DOC}
    names: set[str] = set()
    for name, model in cost_models().items():
        size = model.size(config, flow, Cluster(1, 2, 10**10))
        cost = model.cost(size)
        flow |= cost.outputs
        if name == stage:
            names = {k for form in cost.measures().values() for k in form if k != "known"}
    return names


@pytest.mark.parametrize("quick", [False, True])
def test_the_bpe_cases_tell_every_time_coefficient_apart(quick):
    """Each wall-time coefficient of `train_tokenizer` needs its own direction among the
    calibration's sizes: with one split size, reading the split looks like start-up."""
    import numpy as np

    from lmforge.pipeline.estimate.calibration.cases import CASES
    from lmforge.pipeline.estimate.calibration.synthetic_split import parse_size
    from lmforge.pipeline.stages.train_tokenizer import cost as train_tokenizer_cost

    case = next(c for c in CASES if c.name == "tokenizer_sample")
    sizes = case.quick if quick else case.calibration
    rows = []
    for split, sample, vocab in sizes:
        size = {
            "train_text_bytes": parse_size(split),
            "sample_bytes": parse_size(sample),
            "vocab_size": vocab,
            "bytes_per_token": 3.4,
        }
        rows.append(train_tokenizer_cost.cost(size).wall_s)
    names = sorted({n for row in rows for n, v in row.items() if v})
    if quick:  # the quick cases keep one vocabulary: the merges' cost keeps its prior
        names.remove("s_per_vocab")
    matrix = np.array([[row.get(n, 0.0) for n in names] for row in rows], dtype=float)
    matrix /= np.abs(matrix).max(axis=0)
    assert {"fixed_s", "s_per_read_byte", "s_per_sampled_byte"} <= set(names)
    assert np.linalg.matrix_rank(matrix) == len(names), names


def test_memory_is_fitted_so_no_measured_peak_is_predicted_below_what_it_was():
    import random

    rng = random.Random(3)
    samples = clean_samples(SIZES, 0.0) + clean_samples(SIZES[:3], 1.0)
    for sample in samples:  # peaks scattered +-15% around the linear truth
        sample["measured"]["coordinator_rss_mb"] *= rng.uniform(0.85, 1.15)
    fitted = fit_stage("clean", samples, PREVIOUS)
    ratios = []
    for sample in samples:
        form = clean_cost.cost(sample["size"]).measures()["coordinator_rss_mb"]
        ratios.append(evaluate(form, fitted, "clean") / sample["measured"]["coordinator_rss_mb"])
    assert min(ratios) >= 1 - 1e-6
    assert max(ratios) < 1.4  # an envelope, not an overshoot


@pytest.mark.parametrize("quick", [False, True])
def test_the_pipeline_cases_tell_the_actors_start_up_from_the_stages_own(quick):
    """Each eval stage is calibrated both in process and on actors: with one mode only,
    `fixed_s` and `actor_start_s` are one number."""
    from lmforge.pipeline.estimate.calibration.cases import CASES

    case = next(c for c in CASES if c.name == "pipeline")
    runs = case.quick if quick else case.calibration
    for name in ("perplexity", "sample", "harm"):
        modes = set()
        for overrides in runs:
            cfg = compose(list(overrides))["eval"][name]
            modes.add(bool(cfg["in_process"]))
        assert modes == {True, False}, name
