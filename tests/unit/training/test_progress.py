"""The progress line, tokens/s and MFU arithmetic."""

from __future__ import annotations

import time

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.flops import flops_per_token
from lmforge.pipeline.training.mfu import measure_matmul_flops, model_flops_utilisation, table_peak
from lmforge.pipeline.training.progress import (
    ThroughputMeter,
    format_duration,
    format_rate,
    progress_line,
)


def test_the_progress_line_shows_step_loss_lr_rate_mfu_and_eta():
    line = progress_line(
        step=120, max_steps=400, loss=3.21, lr=5e-4, tokens_per_s=12345, mfu=0.004, eta_s=80
    )
    assert line == "step 120/400 loss 3.2100 lr 5.0e-04 12.3k tok/s MFU 0.4% ETA 1m20s"
    unknown = progress_line(step=1, max_steps=2, loss=1, lr=1, tokens_per_s=5, mfu=None, eta_s=0)
    assert "MFU" not in unknown


@pytest.mark.parametrize(
    ("seconds", "text"), [(7, "7s"), (80, "1m20s"), (3720, "1h02m"), (-3, "0s")]
)
def test_durations_read_naturally(seconds, text):
    assert format_duration(seconds) == text


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
