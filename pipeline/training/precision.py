"""Which precision a worker trains in: `train.precision` resolved on the worker's own device.

`bf16_if_native` autocasts to bf16 where the hardware computes it natively (a GPU with bf16; a
CPU with AVX512-BF16 or AMX-BF16) and stays in fp32 elsewhere: on a CPU without those
instructions bf16 matmuls are emulated and slower than fp32, on one with them they are several
times faster (the tiny preset's 1024x128 @ 128x512 matmul on one Zen 4 core: 0.70 ms in bf16,
2.31 in fp32). Parameters, gradients and optimizer state stay fp32 whatever the choice.

`bf16_if_native_except_amx` (the tiny preset's) does the same but keeps fp32 on a CPU with AMX,
where bf16 was measured not to pay for what it costs the demo: on a 2-vCPU Intel Xeon with AMX
the demo's training ran only 1.15-1.2x as fast in bf16 as in fp32 (1.6x on a Zen 5 AMD EPYC,
which has AVX512-BF16 and no AMX), and one of the three seeds of `bench/demo_quality.py` then
missed the greedy bar, which all three met in fp32 there (docs/training.md, "Precision").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from lmforge.pipeline.training.train_config import TrainConfig

AMX_FLAG = "amx_bf16"
AVX512_BF16_FLAG = "avx512_bf16"
"""The CPU capabilities (`torch.cpu.get_capabilities()`, or /proc/cpuinfo's flags) that compute
bf16 matmuls in hardware."""

NATIVE_CHOICES = ("bf16_if_native", "bf16_if_native_except_amx")
"""The `train.precision` values that depend on what the device computes natively."""


def cpu_bf16_unit(capabilities: Mapping[str, object] | None = None) -> str | None:
    """What computes bf16 matmuls on this CPU (or one with these capabilities): "amx" (AMX-BF16
    tiles, whatever else it has), "avx512_bf16", or None (emulated)."""
    if capabilities is None:
        import torch

        capabilities = torch.cpu.get_capabilities()
    if capabilities.get(AMX_FLAG):
        return "amx"
    return "avx512_bf16" if capabilities.get(AVX512_BF16_FLAG) else None


def cpuinfo_bf16_unit(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """`cpu_bf16_unit` from the flags the kernel lists, without importing torch (the estimate
    must answer at once); None where there is no such file (not Linux)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return cpu_bf16_unit(dict.fromkeys(flags.partition(":")[2].split(), True))


def cpu_autocasts(precision: str, unit: str | None) -> bool:
    """Whether CPU workers train under bf16 autocast with `precision` on a CPU whose bf16
    matmuls run on `unit` (`cpu_bf16_unit`): `auto` and `fp32` never do."""
    if precision == "bf16":
        return True
    if precision == "bf16_if_native":
        return unit is not None
    return precision == "bf16_if_native_except_amx" and unit == "avx512_bf16"


def _autocasts(
    precision: str,
    use_gpu: bool,
    gpu_has_bf16: Callable[[], bool],
    cpu_unit: Callable[[], str | None] | None = None,
) -> bool:
    """bf16 autocast: `bf16`; `auto` and the native choices on a GPU that supports it;
    on CPU as `cpu_autocasts` says."""
    if precision == "bf16":
        return True
    if use_gpu:
        return precision in ("auto", *NATIVE_CHOICES) and gpu_has_bf16()
    if precision not in NATIVE_CHOICES:
        return False
    return cpu_autocasts(precision, (cpu_unit or cpu_bf16_unit)())


def _cuda_has_bf16() -> bool:
    import torch

    return torch.cuda.is_bf16_supported()


def uses_bf16(cfg: TrainConfig) -> bool:
    """Whether a worker with `cfg` on this device trains under bf16 autocast."""
    return _autocasts(cfg.precision, cfg.use_gpu, _cuda_has_bf16)


def expects_bf16(precision: str, use_gpu: bool) -> bool:
    """`uses_bf16` as predicted before any worker starts (the estimate), without torch: a GPU
    is taken to support bf16, a CPU worker to be this machine's kind."""
    return _autocasts(precision, use_gpu, lambda: True, lambda: cpuinfo_bf16_unit())
