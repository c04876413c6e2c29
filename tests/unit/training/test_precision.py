"""`train.precision` resolved on a worker's device (`precision.uses_bf16`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmforge.pipeline.training import precision
from lmforge.pipeline.training.config import TrainConfig
from lmforge.pipeline.training.precision import (
    cpu_computes_bf16,
    cpuinfo_computes_bf16,
    expects_bf16,
    uses_bf16,
)


@pytest.mark.parametrize(
    ("capabilities", "native"),
    [
        ({"avx512_bf16": True, "avx512_f": True}, True),  # Zen 4, Cooper Lake
        ({"amx_bf16": True, "avx512_bf16": False}, True),  # AMX without the AVX-512 flag
        ({"avx512_f": True, "avx512_bw": True, "avx512_bf16": False}, False),  # Skylake-X
        ({"avx2": True}, False),  # Zen 1-3
        ({}, False),
    ],
)
def test_native_bf16_means_bf16_matmul_instructions(capabilities, native):
    assert cpu_computes_bf16(capabilities) is native


def test_this_cpus_capabilities_agree_with_the_kernels_cpu_flags():
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo")
    flags = next(line for line in cpuinfo.read_text().splitlines() if line.startswith("flags"))
    listed = set(flags.split(":", 1)[1].split())
    assert cpu_computes_bf16() == bool(listed & {"avx512_bf16", "amx_bf16"})
    assert cpuinfo_computes_bf16() == cpu_computes_bf16()  # the estimate's reading, torch-free


def test_the_cpuinfo_reading_takes_the_flags_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpuinfo_computes_bf16(cpuinfo)
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert not cpuinfo_computes_bf16(cpuinfo)
    assert not cpuinfo_computes_bf16(tmp_path / "missing")  # not Linux: fp32 expected


@pytest.mark.parametrize("native", [True, False])
def test_on_cpu_only_bf16_and_bf16_if_native_on_such_a_cpu_autocast(monkeypatch, native):
    monkeypatch.setattr(precision, "cpu_computes_bf16", lambda: native)
    assert uses_bf16(TrainConfig(precision="bf16"))
    assert not uses_bf16(TrainConfig(precision="fp32"))
    assert not uses_bf16(TrainConfig(precision="auto"))  # auto keeps fp32 on any CPU
    assert uses_bf16(TrainConfig(precision="bf16_if_native")) is native


@pytest.mark.parametrize("native", [True, False])
def test_the_estimate_expects_the_precision_the_workers_take(monkeypatch, native):
    monkeypatch.setattr(precision, "cpu_computes_bf16", lambda: native)
    monkeypatch.setattr(precision, "cpuinfo_computes_bf16", lambda: native)
    for value in ("auto", "fp32", "bf16", "bf16_if_native"):  # CPU workers
        assert expects_bf16(value, False) == uses_bf16(TrainConfig(precision=value))
    assert expects_bf16("auto", True) and expects_bf16("bf16_if_native", True)
    assert not expects_bf16("fp32", True)
