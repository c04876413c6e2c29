"""The DAG of stages: validation, topological order, ancestors and descendants."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lmforge.pipeline.engine.stage import StageSpec
from lmforge.pipeline.errors import ConfigError


class Dag:
    """Stages and their upstream edges, checked for unknown inputs and cycles."""

    def __init__(self, stages: Mapping[str, StageSpec]) -> None:
        """A stage that exists only in a mixture (`in_mixture`) is left out: a mixture's DAG is
        `source_instances.for_config`'s, which instantiates it."""
        self.stages = {n: s for n, s in stages.items() if s.in_mixture is None or s.base}
        for spec in self.stages.values():
            for upstream in spec.inputs:
                if upstream not in self.stages:
                    raise ConfigError(f"stage {spec.name!r} reads unknown stage {upstream!r}")
        self.order = self._topological_order()

    def _topological_order(self) -> list[str]:
        order: list[str] = []
        state: dict[str, str] = {}

        def visit(name: str, path: tuple[str, ...]) -> None:
            if state.get(name) == "done":
                return
            if state.get(name) == "visiting":
                raise ConfigError(f"cycle in the DAG: {' -> '.join(path + (name,))}")
            state[name] = "visiting"
            for upstream in self.stages[name].inputs:
                visit(upstream, path + (name,))
            state[name] = "done"
            order.append(name)

        for name in self.stages:
            visit(name, ())
        return order

    def ancestors(self, name: str) -> set[str]:
        """Every stage `name` depends on, directly or not."""
        self._check(name)
        found: set[str] = set()
        stack = list(self.stages[name].inputs)
        while stack:
            upstream = stack.pop()
            if upstream not in found:
                found.add(upstream)
                stack.extend(self.stages[upstream].inputs)
        return found

    def descendants(self, name: str) -> set[str]:
        """Every stage that depends on `name`, directly or not."""
        self._check(name)
        return {other for other in self.stages if name in self.ancestors(other)}

    def upto(self, name: str) -> list[str]:
        """`name` and its ancestors, in topological order."""
        keep = self.ancestors(name) | {name}
        return [stage for stage in self.order if stage in keep]

    def restrict(self, names: Iterable[str]) -> list[str]:
        keep = set(names)
        return [stage for stage in self.order if stage in keep]

    def _check(self, name: str) -> None:
        if name not in self.stages:
            known = ", ".join(self.order)
            raise ConfigError(f"unknown stage {name!r}; stages are: {known}")

    def describe(self) -> str:
        """One line per stage: its inputs and the config it reads."""
        lines = []
        width = max(len(name) for name in self.order)
        for name in self.order:
            spec = self.stages[name]
            inputs = ", ".join(spec.inputs) or "(raw sources)"
            sections = ", ".join(spec.config_sections) or "-"
            sized = f"; sized by: {', '.join(spec.sizing)}" if spec.sizing else ""
            lines.append(f"{name:<{width}}  <- {inputs}   [config: {sections}{sized}]")
        return "\n".join(lines)
