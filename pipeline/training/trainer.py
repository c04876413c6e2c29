"""Ray Train's `TorchTrainer` without the helper actors that our runs never use.

Ray Train (v2) starts a `DatasetManager` actor for every run, also for one given no Ray Data
`datasets` (ours read token shards themselves): one more Python process that imports Ray Data
while the ranks start, about 1.5 s of CPU on a 2-core machine (3 s on a slower one) taken from
the ranks' own start-up, and about 150 MB of memory for the run's length. Without datasets,
`PipelineTrainer` leaves out the callback that starts it.

Before it starts the ranks, Ray Train's controller also asks Ray Data's autoscaling coordinator
(a detached actor, started on first use) to reserve the workers' resources, and waits for the
answer: on a cluster with an autoscaler that is how the cluster grows for the run. A local
runtime has no autoscaler, and the coordinator is one more process importing Ray Data on the
critical path of every run (the controller's start to the ranks' took 7.6 s with it and
5.1-5.3 s without on a slower 2-core machine). Where `RESOURCE_REQUESTS_ENV` is "0" (what a local
runtime sets, `ray_runtime.LOCAL_DEFAULTS`), the fixed-size policy runs without those requests.
Where `PG_CLEANER_ENV` is "0" (a local runtime without its dashboard), it also leaves out the
placement-group cleaner: an actor that polls the dashboard's state API every second to free the
run's resources if the controller dies, which a local runtime's end does anyway.
Everything else is Ray Train's.
"""

from __future__ import annotations

import os

from ray.train.torch import TorchTrainer

DATASETS_CALLBACK = "DatasetsCallback"
"""Ray Train's callback that starts the `DatasetManager` actor and hands out dataset shards."""
RESOURCE_REQUESTS_ENV = "LMFORGE_TRAIN_RESOURCE_REQUESTS"
""""0": Ray Train asks no autoscaling coordinator for its workers (a cluster without autoscaler)."""
PG_CLEANER_CALLBACK = "PlacementGroupCleanerCallback"
"""Ray Train's callback that starts the placement-group cleaner actor."""
PG_CLEANER_ENV = "LMFORGE_TRAIN_PG_CLEANER"
""""0": no placement-group cleaner (a runtime without the dashboard whose state API it polls)."""


class PipelineTrainer(TorchTrainer):
    """A `TorchTrainer` that starts no `DatasetManager` when it was given no datasets, and asks
    no autoscaling coordinator for its workers where `RESOURCE_REQUESTS_ENV` is "0".

    `_create_default_callbacks`, `_initialize_and_run_controller` and `_get_local_controller`
    are Ray Train v2's; under another version the overrides are never called and the trainer is
    Ray Train's own.
    """

    def _create_default_callbacks(self):
        callbacks = without_dataset_callbacks(super()._create_default_callbacks(), self.datasets)
        if os.environ.get(PG_CLEANER_ENV) == "0":
            callbacks = without_placement_group_cleaner(callbacks)
        return callbacks

    def _initialize_and_run_controller(self, **controller_init_kwargs):
        policy = controller_init_kwargs.get("scaling_policy")
        if policy is not None and os.environ.get(RESOURCE_REQUESTS_ENV) == "0":
            controller_init_kwargs["scaling_policy"] = without_resource_requests(policy)
        return super()._initialize_and_run_controller(**controller_init_kwargs)

    def _get_local_controller(self):
        """In local mode (`local_mode`), Ray Train's plain local controller, not its torch one:
        that one destroys the process group after every run, and DeepSpeed goes on using that
        group in the process's next run. The caller sets up the group (`world_of_one`)."""
        from ray.train.v2._internal.execution.local_mode.utils import LocalController

        return LocalController(experiment_name=self.run_config.name, datasets=self.datasets)


def without_dataset_callbacks(callbacks: list, datasets: dict | None) -> list:
    """`callbacks` less Ray Data's dataset callback when there are no `datasets` to shard."""
    if datasets:
        return callbacks
    return _without(callbacks, DATASETS_CALLBACK)


def without_placement_group_cleaner(callbacks: list) -> list:
    """`callbacks` less Ray Train's placement-group cleaner."""
    return _without(callbacks, PG_CLEANER_CALLBACK)


def _without(callbacks: list, class_name: str) -> list:
    """`callbacks` less those of Ray Train's class `class_name` (matched by name: the classes
    live in Ray Train's internal modules)."""
    return [cb for cb in callbacks if type(cb).__name__ != class_name]


try:  # Ray Train v2's fixed-size policy; under another version runs keep Ray Train's policy
    from ray.train.v2._internal.execution.scaling_policy.fixed import FixedScalingPolicy
except ImportError:  # pragma: no cover - depends on the installed Ray
    FixedScalingPolicy = None


def without_resource_requests(policy):
    """`policy` if it is not Ray Train's fixed-size one, else that policy without autoscaling
    requests: the same scaling decisions, no coordinator actor asked or started."""
    if FixedScalingPolicy is None or type(policy) is not FixedScalingPolicy:
        return policy
    return FixedScalingWithoutRequests(policy.scaling_config)


if FixedScalingPolicy is not None:

    class FixedScalingWithoutRequests(FixedScalingPolicy):
        """Ray Train's fixed-size policy that never asks the autoscaling coordinator."""

        def after_controller_start(self, train_run_context) -> None:
            pass

        def _maybe_send_resource_request(self) -> None:
            pass

        def _send_resource_request(self) -> None:
            pass

        def _cancel_resource_request(self) -> None:
            pass
