"""Which of Ray Train's default callbacks `PipelineTrainer` keeps."""

from __future__ import annotations

from lmforge.pipeline.training.trainer import (
    without_dataset_callbacks,
    without_placement_group_cleaner,
)


class DatasetsCallback:
    """Stands for Ray Train's callback of that name (matched by class name)."""


class BackendSetupCallback:
    pass


class PlacementGroupCleanerCallback:
    """Stands for Ray Train's callback of that name (matched by class name)."""


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


def test_the_fixed_size_policy_keeps_its_decisions_and_asks_no_coordinator():
    from ray.train import ScalingConfig
    from ray.train.v2._internal.execution.scaling_policy import ResizeDecision
    from ray.train.v2._internal.execution.scaling_policy.fixed import FixedScalingPolicy

    from lmforge.pipeline.training.trainer import without_resource_requests

    scaling = ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1})
    policy = without_resource_requests(FixedScalingPolicy(scaling))
    assert isinstance(policy, FixedScalingPolicy) and type(policy) is not FixedScalingPolicy
    assert policy.make_decision_for_non_running_worker_group() == ResizeDecision(
        num_workers=2, resources_per_worker={"CPU": 1}
    )
    # Ray's own policy would create the coordinator's client here and ask it (needs Ray up).
    policy.after_controller_start(train_run_context=None)
    policy.before_controller_abort()
    assert policy._coordinator_client is None


def test_a_policy_that_is_not_the_fixed_size_one_is_left_as_it_is():
    from ray.train import ScalingConfig
    from ray.train.v2._internal.execution.scaling_policy.fixed import FixedScalingPolicy

    from lmforge.pipeline.training.trainer import without_resource_requests

    class Elastic(FixedScalingPolicy):
        pass

    elastic = Elastic(ScalingConfig(num_workers=2))
    assert without_resource_requests(elastic) is elastic


def test_ray_train_still_passes_the_policy_the_override_replaces():
    import inspect

    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    assert "scaling_policy=" in inspect.getsource(DataParallelTrainer.fit)
    assert callable(DataParallelTrainer._initialize_and_run_controller)


def test_a_local_runtime_turns_the_requests_off():
    from lmforge.pipeline.cluster.ray_runtime import LOCAL_DEFAULTS
    from lmforge.pipeline.training.trainer import RESOURCE_REQUESTS_ENV

    assert LOCAL_DEFAULTS[RESOURCE_REQUESTS_ENV] == "0"


def test_the_placement_group_cleaner_is_left_out_and_every_other_callback_stays():
    backend, data, cleaner = (
        BackendSetupCallback(),
        DatasetsCallback(),
        PlacementGroupCleanerCallback(),
    )
    assert without_placement_group_cleaner([backend, cleaner, data]) == [backend, data]
    assert without_placement_group_cleaner([backend, data]) == [backend, data]


def test_ray_train_still_has_the_cleaner_callback_by_that_name():
    from ray.train.v2._internal.callbacks.placement_group_callback import (
        PlacementGroupCleanerCallback as RayCleanerCallback,
    )

    from lmforge.pipeline.training.trainer import PG_CLEANER_CALLBACK

    assert RayCleanerCallback.__name__ == PG_CLEANER_CALLBACK


def test_a_local_runtime_without_its_dashboard_turns_the_cleaner_off():
    from lmforge.pipeline.cluster.ray_runtime import LOCAL_DEFAULTS, WITHOUT_DASHBOARD_DEFAULTS
    from lmforge.pipeline.training.trainer import PG_CLEANER_ENV

    assert WITHOUT_DASHBOARD_DEFAULTS[PG_CLEANER_ENV] == "0"
    assert PG_CLEANER_ENV not in LOCAL_DEFAULTS  # with the dashboard the cleaner stays
