"""`train.precision` resolved on a worker's device (`precision.uses_bf16`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmforge.pipeline.training import precision
from lmforge.pipeline.training.precision import (
    NATIVE_CHOICES,
    cpu_autocasts,
    cpu_bf16_unit,
    cpuinfo_bf16_unit,
    expects_bf16,
    uses_bf16,
)
from lmforge.pipeline.training.train_config import PRECISIONS, TrainConfig

UNITS = ["amx", "avx512_bf16", None]


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
    assert (cpu_bf16_unit(capabilities) is not None) is native


@pytest.mark.parametrize(
    ("capabilities", "unit"),
    [
        ({"amx_bf16": True, "avx512_bf16": True}, "amx"),  # Sapphire Rapids: AMX does the work
        ({"amx_bf16": True}, "amx"),
        ({"avx512_bf16": True, "avx512_f": True}, "avx512_bf16"),  # Zen 4, Zen 5, Cooper Lake
        ({"avx2": True}, None),
    ],
)
def test_the_bf16_unit_is_amx_wherever_the_cpu_has_it(capabilities, unit):
    assert cpu_bf16_unit(capabilities) == unit


def test_this_cpus_capabilities_agree_with_the_kernels_cpu_flags():
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo")
    flags = next(line for line in cpuinfo.read_text().splitlines() if line.startswith("flags"))
    listed = set(flags.split(":", 1)[1].split())
    assert (cpu_bf16_unit() is not None) == bool(listed & {"avx512_bf16", "amx_bf16"})
    assert cpuinfo_bf16_unit() == cpu_bf16_unit()  # the estimate's reading, torch-free
    assert (cpu_bf16_unit() == "amx") == ("amx_bf16" in listed)


def test_the_cpuinfo_reading_takes_the_flags_line(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n")
    assert cpuinfo_bf16_unit(cpuinfo) == "avx512_bf16"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512_bf16 amx_bf16 amx_tile\n")
    assert cpuinfo_bf16_unit(cpuinfo) == "amx"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni\n")
    assert cpuinfo_bf16_unit(cpuinfo) is None
    assert cpuinfo_bf16_unit(tmp_path / "missing") is None  # not Linux: fp32 expected


@pytest.mark.parametrize("unit", UNITS)
def test_on_cpu_only_bf16_and_the_native_choices_on_such_a_cpu_autocast(monkeypatch, unit):
    monkeypatch.setattr(precision, "cpu_bf16_unit", lambda: unit)
    assert uses_bf16(TrainConfig(precision="bf16"))
    assert not uses_bf16(TrainConfig(precision="fp32"))
    assert not uses_bf16(TrainConfig(precision="auto"))  # auto keeps fp32 on any CPU
    assert uses_bf16(TrainConfig(precision="bf16_if_native")) is (unit is not None)
    # the tiny preset's: bf16 on AVX512-BF16 alone, fp32 where AMX computes bf16 (precision.py)
    assert uses_bf16(TrainConfig(precision="bf16_if_native_except_amx")) is (unit == "avx512_bf16")


def test_every_precision_resolves_on_every_kind_of_cpu():
    table = {value: [cpu_autocasts(value, unit) for unit in UNITS] for value in PRECISIONS}
    assert table == {
        "auto": [False, False, False],
        "fp32": [False, False, False],
        "bf16": [True, True, True],
        "bf16_if_native": [True, True, False],
        "bf16_if_native_except_amx": [False, True, False],
    }


@pytest.mark.parametrize("unit", UNITS)
def test_the_estimate_expects_the_precision_the_workers_take(monkeypatch, unit):
    monkeypatch.setattr(precision, "cpu_bf16_unit", lambda: unit)
    monkeypatch.setattr(precision, "cpuinfo_bf16_unit", lambda: unit)
    for value in PRECISIONS:  # CPU workers
        assert expects_bf16(value, False) == uses_bf16(TrainConfig(precision=value))
    assert all(expects_bf16(value, True) for value in ("auto", *NATIVE_CHOICES))
    assert not expects_bf16("fp32", True)
