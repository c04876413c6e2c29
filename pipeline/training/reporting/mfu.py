"""Model FLOPs utilisation: the peak FLOP/s it is measured against, and MFU itself.

    MFU = tokens_per_s * flops_per_token / (peak_flops_per_worker * num_workers)
    flops_per_token = 6 N + 12 n_layer d_model T      (lmforge.model.flops.flops_per_token)

N is the non-embedding parameter count and T the context (block_size): 6 N for the matmuls of
the forward and backward passes, 12 n_layer d T for the attention scores and weighted sums.

The peak of one worker's device is, in order: `train.peak_flops` when set; for bf16 on a known
GPU, its dense bf16 peak from the vendor's data sheet (table below); otherwise the rate of a
square matmul in the training dtype measured once on the device at start. On CPU the measured
rate stands in for a peak no data sheet gives, so CPU MFU reads "fraction of the best matmul
rate this worker reaches", not of a theoretical maximum.
"""

from __future__ import annotations

import time

import torch

from lmforge.model.config import ModelConfig
from lmforge.model.flops import flops_per_token

# Dense bf16 tensor-core peaks (FLOP/s), from NVIDIA data sheets; matched as a substring of
# torch.cuda.get_device_name(), first match wins (so "H100 PCIe" before "H100").
GPU_BF16_PEAK = (
    ("H100 PCIe", 756e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("L4", 121e12),
    ("A10", 125e12),
)


def table_peak(device_name: str) -> float | None:
    """Dense bf16 peak of a known GPU model, else None."""
    for name, peak in GPU_BF16_PEAK:
        if name in device_name:
            return peak
    return None


def measure_matmul_flops(
    device: torch.device, dtype: torch.dtype, *, size: int = 512, seconds: float = 0.3
) -> float:
    """FLOP/s of repeated [size x size] matmuls on `device` (2 size^3 FLOPs each)."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    torch.matmul(a, b)  # warm-up (kernel selection, allocation)
    _sync(device)
    count, start = 0, time.perf_counter()
    while True:
        torch.matmul(a, b)
        count += 1
        if count % 4 == 0:
            _sync(device)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return 2.0 * size**3 * count / elapsed


def peak_flops(
    configured: float | None, device: torch.device, dtype: torch.dtype
) -> tuple[float, str]:
    """(peak FLOP/s of one worker, where it came from: 'config', 'table' or 'measured')."""
    if configured is not None:
        return configured, "config"
    if device.type == "cuda" and dtype == torch.bfloat16:
        known = table_peak(torch.cuda.get_device_name(device))
        if known is not None:
            return known, "table"
    return measure_matmul_flops(device, dtype), "measured"


def model_flops_utilisation(
    tokens_per_s: float, model_cfg: ModelConfig, peak_per_worker: float, num_workers: int
) -> float:
    """MFU of the whole run (all workers) as a fraction in [0, 1]."""
    return tokens_per_s * flops_per_token(model_cfg) / (peak_per_worker * num_workers)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
