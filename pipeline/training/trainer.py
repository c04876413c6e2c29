"""Ray Train's `TorchTrainer` without the Ray Data helper actor that our runs never use.

Ray Train (v2) starts a `DatasetManager` actor for every run, also for one given no Ray Data
`datasets` (ours read token shards themselves): one more Python process that imports Ray Data
while the ranks start, about 1.5 s of CPU on a 2-core machine (3 s on a slower one) taken from
the ranks' own start-up, and about 150 MB of memory for the run's length. Without datasets,
`PipelineTrainer` leaves out the callback that starts it; everything else is Ray Train's.
"""

from __future__ import annotations

from ray.train.torch import TorchTrainer

DATASETS_CALLBACK = "DatasetsCallback"
"""Ray Train's callback that starts the `DatasetManager` actor and hands out dataset shards."""


class PipelineTrainer(TorchTrainer):
    """A `TorchTrainer` that starts no `DatasetManager` when it was given no datasets.

    `_create_default_callbacks` is Ray Train v2's; under another version the override is never
    called and the trainer is Ray Train's own.
    """

    def _create_default_callbacks(self):
        return without_dataset_callbacks(super()._create_default_callbacks(), self.datasets)


def without_dataset_callbacks(callbacks: list, datasets: dict | None) -> list:
    """`callbacks` less Ray Data's dataset callback when there are no `datasets` to shard."""
    if datasets:
        return callbacks
    return [cb for cb in callbacks if type(cb).__name__ != DATASETS_CALLBACK]
