"""Which of Ray Train's default callbacks `PipelineTrainer` keeps."""

from __future__ import annotations

from lmforge.pipeline.training.trainer import without_dataset_callbacks


class DatasetsCallback:
    """Stands for Ray Train's callback of that name (matched by class name)."""


class BackendSetupCallback:
    pass


def test_without_datasets_the_dataset_callback_is_left_out():
    backend, data = BackendSetupCallback(), DatasetsCallback()
    assert without_dataset_callbacks([backend, data], {}) == [backend]
    assert without_dataset_callbacks([backend, data], None) == [backend]


def test_with_datasets_every_callback_stays():
    backend, data = BackendSetupCallback(), DatasetsCallback()
    assert without_dataset_callbacks([backend, data], {"train": object()}) == [backend, data]


def test_ray_train_still_has_the_callback_and_the_method_the_override_relies_on():
    from ray.train.v2._internal.callbacks import DatasetsCallback as RayDatasetsCallback
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    from lmforge.pipeline.training.trainer import DATASETS_CALLBACK

    assert RayDatasetsCallback.__name__ == DATASETS_CALLBACK
    assert callable(DataParallelTrainer._create_default_callbacks)
