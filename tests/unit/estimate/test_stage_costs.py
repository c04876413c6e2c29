"""A stage's cost model sits beside it and takes its name and inputs from the stage's `@stage`
declaration: one source, so the estimate's DAG cannot drift from the run's."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.stage import unregister_stage
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.estimate.cost_model import Cluster
from lmforge.pipeline.estimate.stage_costs import cost_models, upstream_of

STAGES = "lmforge.pipeline.stages"


def test_every_stage_has_its_cost_model_in_its_own_folder():
    declared = {n for n, s in load_stages().items() if s.fn.__module__.startswith(f"{STAGES}.")}
    models = cost_models()
    assert set(models) == declared and declared
    for name, model in models.items():
        assert model.module.__name__ == f"{STAGES}.{name}.cost"


def test_a_cost_model_takes_its_name_and_inputs_from_the_stage_declaration():
    specs = load_stages()
    for name, model in cost_models().items():
        assert (model.stage, model.inputs) == (specs[name].name, specs[name].inputs)
        # no second declaration to drift from the first
        assert not hasattr(model.module, "STAGE") and not hasattr(model.module, "INPUTS"), name


def test_the_estimate_orders_stages_after_every_input_they_declare():
    models = cost_models()
    order = list(models)
    for name, model in models.items():
        assert all(order.index(u) < order.index(name) for u in model.inputs), name
    only_in_mixtures = {n for n, spec in load_stages().items() if spec.in_mixture}
    assert only_in_mixtures == {"dedup_across"}
    assert upstream_of(models, "report") == set(order) - {"report"} - only_in_mixtures
    assert upstream_of(models, "tokenize") == {"clean", "train_tokenizer"}


def sizes_and_outputs(config: dict, cluster: Cluster) -> tuple[dict, dict]:
    """Each stage's size and outputs when every stage hands its outputs to every later one."""
    flow = {"docs": 1e6, "bytes": 2e9}
    sizes, outputs = {}, {}
    for name, model in cost_models().items():
        sizes[name] = model.size(config, dict(flow), cluster)
        outputs[name] = model.cost(sizes[name]).outputs
        flow |= outputs[name]
    return sizes, outputs


@pytest.mark.parametrize("preset", ["tiny", "small", "gpu"])
def test_a_cost_model_reads_only_what_its_declared_inputs_hand_downstream(preset):
    """Sized from its own upstream alone (the inputs it declares, theirs, and so on), every
    stage gets the size it gets from every stage's outputs: it reads nothing from a stage it
    does not declare, as the run reads only its inputs' artifacts."""
    config, cluster = compose([f"preset={preset}"]), Cluster(2, 8, 64 * 10**9)
    sizes, outputs = sizes_and_outputs(config, cluster)
    models = cost_models()
    for name, model in models.items():
        flow = {"docs": 1e6, "bytes": 2e9}
        for earlier in models:
            if earlier in upstream_of(models, name):
                flow |= outputs[earlier]
        assert model.size(config, flow, cluster) == sizes[name], name


class Lenient(dict):
    """A summary or an input's view that has every key (1.0 where absent; `.get` gives its
    default): what a size is computed from does not matter here, only which inputs are read."""

    def __missing__(self, key: str) -> float:
        return 1.0


class Inputs(dict):
    """The inputs' views handed to `size_of_run`, noting which stages it looks up."""

    def __init__(self, views: dict) -> None:
        super().__init__(views)
        self.read: set[str] = set()

    def __getitem__(self, name: str):
        self.read.add(name)
        return super().__getitem__(name)

    def get(self, name: str, default=None):
        self.read.add(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self.read.add(str(name))
        return super().__contains__(name)


def undeclared_reads(model, config: dict) -> set[str]:
    """The stages `model.size_of_run` reads that its stage does not declare as inputs."""
    inputs = Inputs({name: Lenient() for name in cost_models()})
    sections = {
        section: _section(config, section) for section in load_stages()[model.stage].config_sections
    }
    model.size_of_run(sections, Lenient(), inputs, Cluster(1, 2, 8 * 10**9))
    return inputs.read - set(model.inputs)


def test_a_finished_stage_is_sized_from_its_declared_inputs_alone():
    """`size_of_run` gets the manifests of the stage's declared inputs only (the engine hands
    it nothing else): what it looked up in another stage's would silently be missing."""
    config = compose(["preset=tiny"])
    for name, model in cost_models().items():
        assert not undeclared_reads(model, config), name


def test_reading_an_undeclared_input_is_caught(planted):
    reads_clean = COST.replace(
        "def size_of_run(sections, summary, upstream, cluster):\n        return {}",
        "def size_of_run(sections, summary, upstream, cluster):\n"
        "        return {'docs': upstream.get('clean', {}).get('docs_out', 0)}",
    )
    package = planted(
        {"planted_eval/stage.py": declaring("planted_eval"), "planted_eval/cost.py": reads_clean}
    )
    model = cost_models(package)["planted_eval"]
    assert undeclared_reads(model, compose()) == {"clean"}


def _section(config: dict, dotted: str):
    for key in dotted.split("."):
        config = config[key]
    return config


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """Write a throwaway stages package from {path: source}, each folder a stage of its name;
    forget its stages and modules afterwards."""
    folders: set[str] = set()

    def write(files: dict[str, str]) -> str:
        root = tmp_path / "planted_stages"
        for path, source in files.items():
            folders.add(path.split("/")[0])
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(textwrap.dedent(source))
        for folder in folders:
            (root / folder / "__init__.py").touch()
        declared = sorted(p.split("/")[0] for p in files if p.endswith("/stage.py"))
        (root / "__init__.py").write_text(
            "".join(f"import {root.name}.{f}.stage\n" for f in declared)
        )
        importlib.invalidate_caches()
        return root.name

    monkeypatch.syspath_prepend(str(tmp_path))
    yield write
    for name in folders:
        unregister_stage(name)
    for module in [m for m in sys.modules if m.split(".")[0] == "planted_stages"]:
        del sys.modules[module]


def declaring(name: str, inputs: tuple[str, ...] = ()) -> str:
    return f"""
        from lmforge.pipeline.engine.stage import stage

        @stage(name={name!r}, inputs={inputs!r})
        def run(ctx):
            return {{}}
        """


COST = """
    from lmforge.pipeline.estimate.cost_model import ProcessCost, StageCost

    def size(config, flow, cluster):
        return {}

    def size_of_run(sections, summary, upstream, cluster):
        return {}

    def measured_of_run(summary):
        return {}

    def cost(size):
        return StageCost({"fixed_s": 1}, {}, [ProcessCost("coordinator", {})])
    """


def test_the_order_and_inputs_are_the_declarations_own(planted):
    package = planted(
        {
            "planted_zeta/stage.py": declaring("planted_zeta"),
            "planted_zeta/cost.py": COST,
            "planted_alpha/stage.py": declaring("planted_alpha", ("planted_zeta",)),
            "planted_alpha/cost.py": COST,
        }
    )
    models = cost_models(package)
    assert list(models) == ["planted_zeta", "planted_alpha"]
    assert models["planted_alpha"].inputs == ("planted_zeta",)


def test_a_stage_without_a_cost_model_is_named_with_the_file_to_write(planted):
    package = planted({"planted_bare/stage.py": declaring("planted_bare")})
    with pytest.raises(
        LmforgeError, match=r"'planted_bare' has no cost model: write .*planted_bare/cost.py"
    ):
        cost_models(package)


def test_a_cost_model_of_no_stage_is_named(planted):
    package = planted(
        {
            "planted_kept/stage.py": declaring("planted_kept"),
            "planted_kept/cost.py": COST,
            "planted_renamed/__init__.py": "",
            "planted_renamed/cost.py": COST,
        }
    )
    with pytest.raises(LmforgeError, match=r"planted_renamed/cost.py: a cost model of no stage"):
        cost_models(package)


def test_a_cost_model_missing_a_function_is_named(planted):
    partial = COST.replace("def measured_of_run", "def measured")
    package = planted(
        {"planted_part/stage.py": declaring("planted_part"), "planted_part/cost.py": partial}
    )
    with pytest.raises(LmforgeError, match=r"planted_part/cost.py does not define measured_of_run"):
        cost_models(package)
