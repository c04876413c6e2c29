"""The progress line, tokens/s and MFU arithmetic."""

from __future__ import annotations

import time

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.flops import flops_per_token
from lmforge.pipeline.training.reporting.mfu import (
    measure_matmul_flops,
    model_flops_utilisation,
    table_peak,
)
from lmforge.pipeline.training.reporting.progress import (
    ThroughputMeter,
    eta_seconds,
    format_rate,
    phase_step_estimate,
    progress_line,
    recent_step_seconds,
    term_steps,
    training_eta,
)


def test_the_progress_line_shows_step_loss_lr_rate_mfu_and_eta():
    line = progress_line(
        step=120, max_steps=400, loss=3.21, lr=5e-4, tokens_per_s=12345, mfu=0.004, eta_s=80
    )
    assert line == "step 120/400 loss 3.2100 lr 5.0e-04 12.3k tok/s MFU 0.4% ETA 1m20s"
    unknown = progress_line(step=1, max_steps=2, loss=1, lr=1, tokens_per_s=5, mfu=None, eta_s=0)
    assert "MFU" not in unknown


def test_rates_use_k_and_m():
    assert (format_rate(950), format_rate(12_340), format_rate(2_500_000)) == (
        "950",
        "12.3k",
        "2.5M",
    )


def test_the_overall_rate_leaves_out_the_first_warm_up_step():
    meter = ThroughputMeter(tokens_per_step=1000)
    time.sleep(0.05)  # a slow first step must not count
    meter.step_done(1)
    time.sleep(0.02)
    meter.step_done(2)
    meter.step_done(3)
    rate = meter.overall_rate()
    assert 2000 / 0.2 < rate < 2000 / 0.02


def test_mfu_is_model_flops_over_the_peak_of_all_workers():
    cfg = ModelConfig(vocab_size=100, block_size=16, d_model=32, n_head=2, n_layer=2, d_ff=128)
    tokens_per_s = 1000.0
    mfu = model_flops_utilisation(tokens_per_s, cfg, peak_per_worker=1e9, num_workers=2)
    assert mfu == pytest.approx(1000 * flops_per_token(cfg) / 2e9)


def test_known_gpus_get_their_data_sheet_peak_most_specific_name_first():
    assert table_peak("NVIDIA H100 PCIe") == 756e12
    assert table_peak("NVIDIA H100 80GB HBM3") == 989e12
    assert table_peak("NVIDIA A100-SXM4-40GB") == 312e12
    assert table_peak("Some Future Accelerator") is None


def test_the_measured_matmul_rate_is_a_plausible_cpu_rate():
    rate = measure_matmul_flops(torch.device("cpu"), torch.float32, size=128, seconds=0.05)
    assert 1e7 < rate < 1e13


def test_recent_step_seconds_are_medians_of_each_kind_of_step():
    # 10 steps done, the last 4 timed: 0-based steps 6 and 7 plain, 8 and 9 with the term
    assert recent_step_seconds([0.1, 0.3, 0.5, 0.7], done=10, phase_start=8) == {
        False: pytest.approx(0.2),
        True: pytest.approx(0.6),
    }
    assert recent_step_seconds([0.1, 0.2, 0.9], done=3, phase_start=100) == {False: 0.2}
    assert recent_step_seconds([], done=3, phase_start=0) == {}


def test_the_eta_counts_the_remaining_steps_of_each_kind_at_their_own_time():
    # 1200 plain steps then 300 with the sequence-level term, 3x as long
    kw = {"max_steps": 1500, "phase_start": 1200, "plain_s": 0.2, "phase_s": 0.6}
    assert eta_seconds(done=1000, **kw) == pytest.approx(200 * 0.2 + 300 * 0.6)
    assert eta_seconds(done=1300, **kw) == pytest.approx(200 * 0.6)
    assert eta_seconds(done=1500, **kw) == 0
    no_phase = {**kw, "phase_start": 1500}
    assert eta_seconds(done=1000, **no_phase) == pytest.approx(500 * 0.2)


def test_with_the_term_on_every_other_step_of_the_phase_half_its_steps_cost_more():
    # the phase's steps 1200, 1202, ..., 1498 carry the term: 150 of its 300
    kw = {"max_steps": 1500, "phase_start": 1200, "plain_s": 0.2, "phase_s": 0.6, "every": 2}
    assert eta_seconds(done=1000, **kw) == pytest.approx(350 * 0.2 + 150 * 0.6)
    assert eta_seconds(done=1301, **kw) == pytest.approx(100 * 0.2 + 99 * 0.6)
    assert [term_steps(0, 10, 4, 3), term_steps(5, 10, 4, 3), term_steps(8, 8, 0, 1)] == [2, 1, 0]
    # steps 6-9 timed: 6 and 8 carry the term, 7 and 9 do not
    assert recent_step_seconds([0.5, 0.1, 0.7, 0.3], done=10, phase_start=6, every=2) == {
        False: pytest.approx(0.2),
        True: pytest.approx(0.6),
    }


def test_a_step_with_the_term_is_estimated_from_a_plain_step_and_the_decoding():
    # a second forward and backward over 96 of 128 tokens, and the timed decoding
    timed = phase_step_estimate(
        0.2, decoded_tokens=64, sequence_tokens=96, block_size=128, decoding_s=0.15
    )
    assert timed == pytest.approx(0.2 + 0.2 * 96 / 128 + 0.15)
    # untimed (ZeRO-3): the decoded tokens' forward pass, a third of their step's share
    untimed = phase_step_estimate(
        0.2, decoded_tokens=64, sequence_tokens=96, block_size=128, decoding_s=None
    )
    assert untimed == pytest.approx(0.2 + 0.2 * 96 / 128 + 0.2 * 64 / (3 * 128))


def test_the_training_eta_estimates_the_term_s_steps_until_one_is_measured():
    calls = []

    def estimate(plain_s):
        calls.append(plain_s)
        return 3 * plain_s

    kw = {"max_steps": 1500, "phase_start": 1200, "plain_fallback_s": 1.0}
    # only plain steps measured, the phase ahead or just starting: estimated from them
    for done in (100, 1200):
        eta = training_eta(done=done, measured={False: 0.2}, phase_estimate=estimate, **kw)
        assert eta == pytest.approx((1200 - done) * 0.2 + 300 * 0.6)
    assert calls == [0.2, 0.2]
    # once a step with the term is measured, its own time counts
    eta = training_eta(done=1300, measured={False: 0.2, True: 0.7}, phase_estimate=estimate, **kw)
    assert eta == pytest.approx(200 * 0.7)
    # nothing measured yet: the fallback; no phase left: no estimate asked for
    assert training_eta(done=10, measured={}, phase_estimate=estimate, **kw) == pytest.approx(
        1190 * 1.0 + 300 * 3.0
    )
    calls.clear()
    off = {**kw, "phase_start": 1500}
    assert training_eta(done=10, measured={False: 0.2}, phase_estimate=estimate, **off) == (
        pytest.approx(1490 * 0.2)
    )
    assert calls == []
