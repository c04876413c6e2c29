"""Ray Train's controller unpickles the training entry point and its job: their module must not
import the training stack (torch, DeepSpeed), or the controller imports it too before starting any
worker (4.5 s on the critical path of every run on two cores, and about 60 MB of its memory)."""

from __future__ import annotations

import os
import sys

import pytest
from import_check import loaded_by_import

from lmforge.pipeline.training.payload import TrainingPayload
from lmforge.pipeline.training.worker_entry import train_loop_per_worker


def test_the_entry_point_and_its_job_import_without_torch_or_deepspeed():
    for module in ("lmforge.pipeline.training.worker_entry", "lmforge.pipeline.training.payload"):
        loaded = loaded_by_import(module, ["torch", "deepspeed"])
        assert loaded == {"torch": False, "deepspeed": False}, module


def test_ray_train_is_given_the_light_entry_point():
    from lmforge.pipeline.training import launch

    assert launch.train_loop_per_worker is train_loop_per_worker
    assert launch.TrainingPayload is TrainingPayload
    assert train_loop_per_worker.__module__ == "lmforge.pipeline.training.worker_entry"


def test_a_cpu_rank_names_deepspeeds_accelerator_and_imports_no_mlflow_until_it_logs():
    """No rank warns of a missing GPU; DeepSpeed's autotuner does not import MLflow into every
    rank, and MLflow still imports where rank 0 logs; DeepSpeed's Muon module, which ZeRO's
    steps import, is loaded without torch's compiler."""
    import subprocess

    code = (
        "import sys\n"
        "from lmforge.pipeline.training.train_config import TrainConfig\n"
        "from lmforge.pipeline.training.worker_entry import import_worker\n"
        "import_worker(TrainConfig(use_gpu=False))\n"
        "print('deepspeed', 'deepspeed' in sys.modules, 'mlflow', 'mlflow' in sys.modules)\n"
        "muon = 'deepspeed.runtime.zero.muon.muon_optimizer' in sys.modules\n"
        "print('muon', muon, 'compiler', 'torch._inductor.compile_fx' in sys.modules)\n"
        "from deepspeed.accelerator import get_accelerator\n"
        "print('accelerator', get_accelerator()._name)\n"
        "import mlflow\n"
        "print('tracking', mlflow.MlflowClient.__name__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "deepspeed True mlflow False" in proc.stdout
    assert "muon True compiler False" in proc.stdout  # `COMPILED_AT_IMPORT`, compiling nothing
    assert "accelerator cpu" in proc.stdout
    assert "tracking MlflowClient" in proc.stdout
    assert "unable to detect" not in proc.stdout + proc.stderr


def test_a_hidden_module_fails_to_import_inside_and_imports_after():
    from lmforge.pipeline.training.worker_entry import hidden_modules

    sys.modules.pop("colorsys", None)
    with hidden_modules(["colorsys", "json"]):
        with pytest.raises(ImportError):
            import colorsys  # noqa: F401
        import json  # loaded before: left alone

        assert json.dumps([1]) == "[1]"
    import colorsys

    assert colorsys.rgb_to_hsv(0, 0, 0) == (0.0, 0.0, 0.0)


def test_a_gpu_run_or_a_named_accelerator_is_left_to_deepspeed(monkeypatch):
    from lmforge.pipeline.training.train_config import TrainConfig
    from lmforge.pipeline.training.worker_entry import name_deepspeed_accelerator

    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    name_deepspeed_accelerator(TrainConfig(use_gpu=True))
    assert "DS_ACCELERATOR" not in os.environ
    monkeypatch.setenv("DS_ACCELERATOR", "xpu")
    name_deepspeed_accelerator(TrainConfig(use_gpu=False))
    assert os.environ["DS_ACCELERATOR"] == "xpu"


def test_a_function_compiled_at_import_compiles_on_its_first_call_and_only_then(monkeypatch):
    import torch

    from lmforge.pipeline.training.worker_entry import compile_deferred

    compiled = []

    def compile_now(model=None, **options):
        compiled.append((model, options))
        return lambda *args: ("compiled", model(*args))

    monkeypatch.setattr(torch, "compile", compile_now)
    module = torch.nn.Linear(1, 1)
    with compile_deferred():
        double = torch.compile(lambda x: 2 * x, fullgraph=True)
        triple = torch.compile(mode="max-autotune")(lambda x: 3 * x)  # as a decorator factory
        torch.compile(module)
    assert [model for model, _ in compiled] == [module]  # a module compiles at once
    assert torch.compile is compile_now, "torch's compile is put back"
    assert double(4) == ("compiled", 8) and double(5) == ("compiled", 10)
    assert triple(2) == ("compiled", 6)
    options = [options for _, options in compiled[1:]]
    assert options == [{"fullgraph": True}, {"mode": "max-autotune"}]
