"""Which precision a worker trains in: `train.precision` resolved on the worker's own device.

`bf16_if_native` autocasts to bf16 where the hardware computes it natively (a GPU with bf16; a
CPU with AVX512-BF16 or AMX-BF16) and stays in fp32 elsewhere: on a CPU without those
instructions bf16 matmuls are emulated and slower than fp32, on one with them they are several
times faster (the tiny preset's 1024x128 @ 128x512 matmul on one Zen 4 core: 0.70 ms in bf16,
2.31 in fp32). Parameters, gradients and optimizer state stay fp32 whatever the choice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from lmforge.pipeline.training.config import TrainConfig

NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU capabilities (`torch.cpu.get_capabilities()`) that compute bf16 matmuls in hardware."""


def cpu_computes_bf16(capabilities: Mapping[str, object] | None = None) -> bool:
    """Whether this CPU (or one with these capabilities) has bf16 matmul instructions."""
    if capabilities is None:
        import torch

        capabilities = torch.cpu.get_capabilities()
    return any(bool(capabilities.get(flag)) for flag in NATIVE_BF16_FLAGS)


def cpuinfo_computes_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """`cpu_computes_bf16` from the flags the kernel lists, without importing torch (the
    estimate must answer at once); False where there is no such file (not Linux)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return cpu_computes_bf16(dict.fromkeys(flags.partition(":")[2].split(), True))


def _autocasts(
    precision: str,
    use_gpu: bool,
    gpu_has_bf16: Callable[[], bool],
    cpu_has_bf16: Callable[[], bool] | None = None,
) -> bool:
    """bf16 autocast: `bf16`; `auto` on a GPU that supports it (fp32 on CPU); `bf16_if_native`
    on such a GPU or on a CPU that computes bf16 natively."""
    if precision == "bf16":
        return True
    if use_gpu:
        return precision in ("auto", "bf16_if_native") and gpu_has_bf16()
    return precision == "bf16_if_native" and (cpu_has_bf16 or cpu_computes_bf16)()


def _cuda_has_bf16() -> bool:
    import torch

    return torch.cuda.is_bf16_supported()


def uses_bf16(cfg: TrainConfig) -> bool:
    """Whether a worker with `cfg` on this device trains under bf16 autocast."""
    return _autocasts(cfg.precision, cfg.use_gpu, _cuda_has_bf16)


def expects_bf16(precision: str, use_gpu: bool) -> bool:
    """`uses_bf16` as predicted before any worker starts (the estimate), without torch: a GPU
    is taken to support bf16, a CPU worker to be this machine's kind."""
    return _autocasts(precision, use_gpu, lambda: True, lambda: cpuinfo_computes_bf16())
