"""`train.local_mode`: the stage's process is left as it was but for its group of one, and its
task holds the CPUs."""

from __future__ import annotations

import contextlib
import os

import pytest
import torch
import torch.distributed as dist

from lmforge.pipeline.config_tree import compose, section
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.training.local_mode import RANK_ENV, in_this_process
from lmforge.pipeline.training.train_config import TrainConfig


@pytest.fixture
def no_process_group():
    """This test's group of one is gone after it (another test here may set up its own)."""
    assert not dist.is_initialized()
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.mark.usefixtures("no_process_group")
def test_local_runs_share_the_process_group_and_leave_the_rest_as_they_found_it(monkeypatch):
    monkeypatch.setenv("RANK", "7")  # a caller's own value comes back
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    threads = torch.get_num_threads()
    groups = []
    for fails in (True, False):
        with pytest.raises(RuntimeError) if fails else contextlib.nullcontext(), in_this_process():
            assert {name: os.environ[name] for name in RANK_ENV} == RANK_ENV
            groups.append(dist.group.WORLD)
            torch.set_num_threads(1)  # as the worker does
            tensor = torch.ones(2)
            dist.all_reduce(tensor)
            assert tensor.tolist() == [1.0, 1.0]
            if fails:
                raise RuntimeError("a step failed")
        assert torch.get_num_threads() == threads
        assert os.environ["RANK"] == "7"
        assert "LOCAL_RANK" not in os.environ
    assert groups[0] is groups[1]  # DeepSpeed keeps the first one it saw
    assert dist.get_world_size() == 1


def test_the_stage_holds_its_workers_cpus_only_when_it_trains_itself():
    spec = load_stages()["pretrain"]

    def cpus(*overrides: str) -> float:
        config = compose(["preset=tiny", *overrides])
        sections = {path: section(config, path) for path in spec.config_sections}
        return spec.cpus_of(spec.parse_config(sections))

    assert cpus() == 0  # Ray Train's workers hold them
    assert cpus("train.num_workers=1", "train.local_mode=true", "train.cpus_per_worker=2") == 2


def test_the_ray_train_scaling_of_a_local_run_is_its_local_mode():
    from lmforge.pipeline.training.launch import scaling_config

    local = TrainConfig(num_workers=1, global_batch_size=8, local_mode=True)
    assert scaling_config(local).num_workers == 0
    assert scaling_config(TrainConfig(num_workers=1, global_batch_size=8)).num_workers == 1
