"""The calibration cases run from the installed package (no bench/ on the path), each size in a
fresh process whose samples are kept, and the benchmarks write what the cases measure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lmforge.pipeline.estimate.calibration.case_runner import measured_path, run_cases
from lmforge.pipeline.estimate.calibration.cases import CASES
from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize
from lmforge.pipeline.estimate.stage_costs import cost_models

BENCH = Path(__file__).resolve().parents[3] / "bench"


def only(name: str, *sizes):
    return lambda case: sizes if case.name == name else ()


def test_a_case_is_measured_in_a_fresh_process_and_kept(tmp_path, capsys):
    samples = run_cases(tmp_path, only("token_scale", 1e5))
    assert [s["stage"] for s in samples] == ["sample_index"]
    sample = samples[0]
    assert sample["size"]["n_windows"] == 1e5 and sample["size"]["fresh_process"] == 1.0
    assert sample["measured"]["wall_s"] >= 0 and sample["measured"]["coordinator_rss_mb"] > 0
    assert (sample["case"], sample["case_size"]) == ("token_scale", "100000.0")
    kept = measured_path(tmp_path, "token_scale", 1e5)
    assert json.loads(kept.read_text()) == samples
    # A run started again measures only what it had not: the kept samples come back as they were.
    capsys.readouterr()
    assert run_cases(tmp_path, only("token_scale", 1e5)) == samples
    assert "measured earlier" in capsys.readouterr().out


def test_every_case_measures_a_stage_with_a_cost_model():
    stages = {
        "clean_scale": "clean",
        "train_throughput": "pretrain",
        "tokenizer_sample": "train_tokenizer",
        "tokenize_throughput": "tokenize",
        "token_scale": "sample_index",
    }
    models = cost_models()
    for case in CASES:
        assert case.calibration and case.quick, case.name
        assert case.name == "pipeline" or stages[case.name] in models, case.name


def test_the_corpus_bench_writes_the_calibration_corpus(tmp_path):
    out = tmp_path / "bench"
    command = [sys.executable, str(BENCH / "corpus_synth.py"), "--docs", "300", "--files", "2"]
    done = subprocess.run(
        [*command, "--out", str(out), "--seed", "4"], capture_output=True, text=True, check=True
    )
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["bench"] == "corpus_synth" and line["docs"] == 300 and line["files"] == 2
    planted = synthesize(tmp_path / "package", 300, 2, seed=4)
    assert line["exact_copies"] == len(planted["exact"])
    for name in planted["files"]:
        assert (out / name).read_bytes() == (tmp_path / "package" / name).read_bytes()
