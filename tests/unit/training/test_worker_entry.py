"""Ray Train's controller unpickles the training entry point and its job: their module must not
import the training stack (torch, DeepSpeed), or the controller imports it too before starting any
worker (4.5 s on the critical path of every run on two cores, and about 60 MB of its memory)."""

from __future__ import annotations

from import_check import loaded_by_import

from lmforge.pipeline.training.job import TrainingJob, train_loop_per_worker


def test_the_entry_point_and_its_job_import_without_torch_or_deepspeed():
    loaded = loaded_by_import("lmforge.pipeline.training.job", ["torch", "deepspeed"])
    assert loaded == {"torch": False, "deepspeed": False}


def test_ray_train_is_given_the_light_entry_point():
    from lmforge.pipeline.training import driver

    assert driver.train_loop_per_worker is train_loop_per_worker
    assert driver.TrainingJob is TrainingJob
    assert train_loop_per_worker.__module__ == "lmforge.pipeline.training.job"
