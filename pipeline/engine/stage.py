"""The stage contract (docs/architecture.md, "The stage contract"): a declared function from a
context to a summary dict.

A stage module under `pipeline/stages/` declares itself with `@stage(...)`; the engine owns Ray,
MLflow, the temporary directory, the atomic commit, the manifest and the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lmforge.pipeline.storage.location import shared_location

if TYPE_CHECKING:  # kept out of light processes (numpy)
    from lmforge.pipeline.storage.artifact_output import ArtifactOutput
    from lmforge.pipeline.storage.input_artifact import ArtifactPath
    from lmforge.pipeline.storage.leases.lease import LeaseSettings
    from lmforge.pipeline.storage.settings import StoreSettings


class Tracker(Protocol):
    """What a stage may record in its MLflow run."""

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None: ...
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...


@dataclass(frozen=True, slots=True)
class StageSpec:
    """A stage's declaration: what it reads, what it needs, how its config is typed."""

    name: str
    fn: Callable[[StageContext], dict]
    inputs: tuple[str, ...]
    config_sections: tuple[str, ...]
    """Dotted paths into the config tree that this stage reads (and its cache key covers)."""
    parse_config: Callable[[dict[str, Any]], Any]
    """Turns {section: mapping} into the stage's typed config; raises ValueError naming a key."""
    version: str
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    cpus_of: Callable[[Any], float] | None = None
    """The CPUs the stage's task reserves, from its typed config, where they depend on it (in
    place of `num_cpus`)."""
    sizing: tuple[str, ...] = ()
    """Config paths that set how much of the artifact is written, not what it holds: parsed with
    `config_sections` but left out of the cache key (e.g. how many epochs an order covers)."""
    covers: Callable[[dict[str, Any], Any], bool] | None = None
    """Whether a committed artifact (its summary) covers the typed config; when it does not, the
    stage runs again under the same key and writes a larger artifact that starts the same."""
    unkeyed: Mapping[str, Any] = field(default_factory=dict)
    """Config keys the stage gained after its keys were first written, each with the value that
    keeps its earlier behaviour: at that value a key stays out of the cache key
    (`keys.without_unkeyed`), so adding it changes no existing key."""
    local_check: Callable[[Any], None] | None = None
    """Checks the typed config before MLflow or Ray start, when the stage is to run on a local
    runtime (no Ray address: this machine's files are the workers'); raises what the stage
    would raise once started (clean: a data path that matches no file). A cluster's stage
    checks on the cluster."""
    per_source: bool = False
    """In a mixture (`data.sources`), one instance of the stage per source, named
    `<stage>[<source>]` (`engine/source_instances.py`); without one, the stage as it is."""
    for_source: Callable[[dict[str, Any], int], dict[str, Any]] | None = None
    """A per-source stage's view of the config for the source at that position of
    `data.sources` (clean: the data group with the source's paths); raises ValueError naming
    the key that is wrong."""
    mixture_inputs: tuple[str, ...] = ()
    """Upstream stages read only in a mixture (report: the per-source token counts), left out
    where the mixture has no such stage."""
    mixture_fields: Mapping[str, Any] | None = None
    """The fields of each source a stage shared by the sources reads ({field: default}): in a
    mixture its config and key gain `data.sources` with those fields only, so a setting it does
    not read (another stage's weight) leaves its key alone."""
    in_mixture: Callable[[dict[str, Any]], bool] | None = None
    """Declared by a stage that exists only in a mixture of two sources or more (the
    cross-source dedup): whether the config asks for it."""
    base: str = ""
    """An instance's stage: the one whose function it runs ("" for the stage itself)."""
    source: str = ""
    """A per-source instance's source."""
    view: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """An instance's config as it reads it, from the run's config (None: the config itself)."""

    @property
    def stage_name(self) -> str:
        """The declared stage this spec is or is an instance of."""
        return self.base or self.name


@dataclass(slots=True)
class StageContext:
    """What a running stage gets: typed config, read-only inputs, an empty output directory.

    Files the stage writes itself go into `out_dir`. Files its tasks write on other nodes go
    through `output` (send it to them): each comes back as a manifest entry (size and checksums
    computed while writing) that the stage hands to `add_files`, so the commit never reads them.
    """

    stage: str
    config: Any
    inputs: dict[str, ArtifactPath]
    """Each upstream stage's artifact (read-only): its directory (a `Path`) with a local store;
    with a bucket an `InputPath` that fetches files into the node cache as they are read."""
    input_manifests: dict[str, dict]
    out_dir: Path
    tracker: Tracker
    workdir: Path
    key: str
    final_dir: Path | None = None
    """Where the artifact can be read on this node once committed (for paths written into it)."""
    mlflow_run_id: str | None = None
    tracking_uri: str | None = None
    store_uri: str | None = None
    """`cluster.store_uri`: None or a path for the local store, else a URI such as s3://..."""
    output: ArtifactOutput | None = None
    """Where tasks write the artifact's files, from any node (`artifact_output`)."""
    store: StoreSettings | None = None
    """The block size and node cache settings (`store_settings`)."""
    written: list[dict] = field(default_factory=list)
    """Manifest entries of the files tasks wrote through `output`."""
    extras: dict[str, Any] = field(default_factory=dict)
    pipeline_run: str = ""
    """The pipeline run this stage runs for ("" outside a pipeline run)."""
    source: str = ""
    """The source of a per-source instance (`clean[code]`: "code"); "" otherwise."""
    sources: list[dict] = field(default_factory=list)
    """A shared stage's view of the mixture: each source's `mixture_fields`, in order; empty
    without `data.sources`."""
    leases: LeaseSettings | None = None
    """Renewal and expiry of the leases the stage takes (`holding`); None: the defaults."""
    lease_wait_s: float | None = None
    """How long `holding` waits for another run's lease (`--lease-wait`); None: no limit."""

    def add_files(self, entries: list[dict] | dict) -> None:
        """Record files written through `output` (their entries, as the writers returned them)."""
        self.written.extend([entries] if isinstance(entries, dict) else entries)

    def keep_for_resume(self) -> None:
        """Keep what the tasks wrote if this run dies, for the next run of the same key to
        continue from (the stage tracks which tasks finished itself)."""
        from lmforge.pipeline.storage.temporaries import RESUMABLE_MARKER

        (self.out_dir / RESUMABLE_MARKER).write_text("")

    def shared_location(self, *parts: str) -> str:
        """A path or URI for data kept outside artifacts (checkpoints, Ray Train storage) that
        every node reaches: under the bucket when the store is one, else under the workdir."""
        return shared_location(self.workdir, self.store_uri, *parts)

    def run_location(self, *parts: str) -> str:
        """`shared_location(*parts)`'s directory of this pipeline run's own (Ray Train's
        storage: `engine/run_storage.py`), removed when the run ends."""
        return self.shared_location(*parts, *[self.pipeline_run] if self.pipeline_run else [])

    def holding(self, *parts: str, what: str) -> AbstractContextManager[Any]:
        """Hold the lease on the shared location `parts` (`shared_location(*parts)`) while
        the block runs, waiting while another run holds it: for data outside artifacts that
        the runs of several keys share (pretrain's checkpoints of one lineage). Its record
        lies beside that location, `.<last part>.lease.json`; `what` names it to people."""
        from lmforge.pipeline.engine.stage_leases import holding
        from lmforge.pipeline.storage.leases.lease import LEASE_SUFFIX

        *parents, last = parts
        return holding(
            self.shared_location(),
            "/".join([*parents, f".{last}{LEASE_SUFFIX}"]),
            run_id=self.pipeline_run or "?",
            stage=self.stage,
            what=what,
            settings=self.leases,
            wait_s=self.lease_wait_s,
        )

    def input(self, name: str) -> ArtifactPath:
        """The artifact directory of upstream stage `name` (see `ArtifactPath`); in a per-source
        instance, a per-source input is its own source's (`clean` in `tokenize[code]`)."""
        if name in self.inputs:
            return self.inputs[name]
        own = f"{name}[{self.source}]"
        if self.source and own in self.inputs:
            return self.inputs[own]
        raise KeyError(f"stage {self.stage!r} did not declare input {name!r}")

    def inputs_of(self, name: str) -> dict[str, ArtifactPath]:
        """{source: artifact} of upstream stage `name`: each source's instance in a mixture, in
        the mixture's order; {"": artifact} where the stage is not per source."""
        if name in self.inputs:
            return {"": self.inputs[name]}
        found = {i.split("[", 1)[1][:-1]: i for i in self.inputs if i.startswith(f"{name}[")}
        order = [s["name"] for s in self.sources] or list(found)
        if not found:
            raise KeyError(f"stage {self.stage!r} did not declare input {name!r}")
        return {src: self.inputs[found[src]] for src in order if src in found}

    def manifests_of(self, name: str) -> dict[str, dict]:
        """{source: manifest} of upstream stage `name`, as `inputs_of`."""
        if name in self.input_manifests:
            return {"": self.input_manifests[name]}
        return {src: self.input_manifests[f"{name}[{src}]"] for src in self.inputs_of(name)}


_REGISTRY: dict[str, StageSpec] = {}


def stage(
    *,
    name: str,
    inputs: tuple[str, ...] = (),
    config: tuple[str, ...] = (),
    parse_config: Callable[[dict[str, Any]], Any] | None = None,
    version: str = "1",
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    cpus_of: Callable[[Any], float] | None = None,
    sizing: tuple[str, ...] = (),
    covers: Callable[[dict[str, Any], Any], bool] | None = None,
    unkeyed: Mapping[str, Any] | None = None,
    local_check: Callable[[Any], None] | None = None,
    per_source: bool = False,
    for_source: Callable[[dict[str, Any], int], dict[str, Any]] | None = None,
    mixture_inputs: tuple[str, ...] = (),
    mixture_fields: Mapping[str, Any] | None = None,
    in_mixture: Callable[[dict[str, Any]], bool] | None = None,
) -> Callable[[Callable[[StageContext], dict]], Callable[[StageContext], dict]]:
    """Declare a stage function and register it under `name` (see `StageSpec`)."""

    def register(fn: Callable[[StageContext], dict]) -> Callable[[StageContext], dict]:
        _REGISTRY[name] = StageSpec(
            name=name,
            fn=fn,
            inputs=tuple(inputs),
            config_sections=tuple(config),
            parse_config=parse_config or (lambda sections: sections),
            version=version,
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            cpus_of=cpus_of,
            sizing=tuple(sizing),
            covers=covers,
            unkeyed=dict(unkeyed or {}),
            local_check=local_check,
            per_source=per_source,
            for_source=for_source,
            mixture_inputs=tuple(mixture_inputs),
            mixture_fields=None if mixture_fields is None else dict(mixture_fields),
            in_mixture=in_mixture,
        )
        return fn

    return register


def registered_stages() -> dict[str, StageSpec]:
    """All stages declared so far, by name."""
    return dict(_REGISTRY)


def unregister_stage(name: str) -> None:
    """Forget a stage (for tests that declare throwaway stages)."""
    _REGISTRY.pop(name, None)
