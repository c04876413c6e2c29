"""Every stage's cost model, found beside the stage and named and wired by its declaration.

A stage's `@stage(name=..., inputs=...)` (`pipeline/engine/stage.py`) is the one source of its
name and inputs: its cost model (`cost.py` in the stage's folder, the contract in
`cost_model.py`) declares neither, so the estimate's order, the quantities handed downstream
and the critical path follow the same DAG as a run. Stages declared outside the stages package
(a test's throwaway stage) have none.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from lmforge.pipeline.engine.stage import StageSpec, registered_stages
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.estimate.cost_model import Cluster, StageCost

STAGES_PACKAGE = "lmforge.pipeline.stages"
FUNCTIONS = ("size", "size_of_run", "measured_of_run", "cost")
"""What a cost module defines (`cost_model.py` says what each returns)."""


@dataclass(frozen=True, slots=True)
class CostModel:
    """A stage's cost module under the stage's declared name and inputs."""

    stage: str
    inputs: tuple[str, ...]
    size: Callable[[dict, dict, Cluster], dict[str, float]]
    size_of_run: Callable[[dict, dict, dict, Cluster], dict[str, float]]
    measured_of_run: Callable[[dict], dict[str, float]]
    cost: Callable[[dict[str, float]], StageCost]
    module: ModuleType


def cost_models(package: str = STAGES_PACKAGE) -> dict[str, CostModel]:
    """The cost model of every stage `package` declares, by stage name, upstream first."""
    declared = stage_folders(package)
    unclaimed = sorted(set(folders_with_cost_model(package)) - set(declared.values()))
    if unclaimed:
        paths = ", ".join(_path(f"{folder}.cost") for folder in unclaimed)
        raise LmforgeError(
            f"{paths}: a cost model of no stage (no @stage in its folder): move it beside the "
            "stage it prices or delete it"
        )
    specs = registered_stages()
    models = {name: _load(specs[name], folder) for name, folder in declared.items()}
    return {name: models[name] for name in _upstream_first(models)}


def stage_folders(package: str = STAGES_PACKAGE) -> dict[str, str]:
    """{stage name: the package of the module that declares it}, for the stages under
    `package` (importing it registers them)."""
    importlib.import_module(package)
    return {
        name: spec.fn.__module__.rpartition(".")[0]
        for name, spec in registered_stages().items()
        if spec.fn.__module__.startswith(f"{package}.")
    }


def folders_with_cost_model(package: str = STAGES_PACKAGE) -> list[str]:
    """The folders under `package` that hold a cost model (`<folder>/cost.py`)."""
    root = importlib.import_module(package)
    folders = [f"{package}.{i.name}" for i in pkgutil.iter_modules(root.__path__) if i.ispkg]
    return [f for f in folders if importlib.util.find_spec(f"{f}.cost") is not None]


def _load(spec: StageSpec, folder: str) -> CostModel:
    name = f"{folder}.cost"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise LmforgeError(
            f"stage {spec.name!r} has no cost model: write {_path(name)} defining "
            f"{', '.join(FUNCTIONS)} (see pipeline/estimate/cost_model.py)"
        ) from exc
    missing = [f for f in FUNCTIONS if not callable(getattr(module, f, None))]
    if missing:
        raise LmforgeError(f"{_path(name)} does not define {', '.join(missing)}: add them")
    functions = {f: getattr(module, f) for f in FUNCTIONS}
    return CostModel(stage=spec.name, inputs=spec.inputs, module=module, **functions)


def _path(module: str) -> str:
    return module.removeprefix("lmforge.").replace(".", "/") + ".py"


def _upstream_first(models: dict[str, CostModel]) -> list[str]:
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order or name not in models:
            return
        for upstream in models[name].inputs:
            visit(upstream)
        order.append(name)

    for name in sorted(models):
        visit(name)
    return order


def upstream_of(models: dict[str, CostModel], stage: str) -> set[str]:
    """Every stage `stage` reads from, directly or through its inputs."""
    found: set[str] = set()
    todo = list(models[stage].inputs)
    while todo:
        name = todo.pop()
        if name in models and name not in found:
            found.add(name)
            todo.extend(models[name].inputs)
    return found
