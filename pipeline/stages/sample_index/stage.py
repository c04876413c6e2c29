"""`sample_index`: the order of training windows, built once and memory-mapped by every rank.

Its cache key covers exactly what the order depends on: the token data (tokenize's key),
`train.seed`, `model.block_size` and `train.epoch_offsets` (which sets the window shift bound and
so the windows), and the format version. So a seed change rebuilds the order without
retokenizing, and `train.lr` or any other training setting leaves it cached.

It covers as many epochs as `train.max_steps * train.global_batch_size` windows need. Those two
settings size the artifact without entering its key (`sizing`): a later run that needs more
rebuilds it under the same key, larger, with the same windows at every position already used, so
a run continued with a raised `train.max_steps` reads on exactly where it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from lmforge.pipeline.engine.stage import StageContext, stage
from lmforge.pipeline.typed_config import from_mapping


@dataclass(kw_only=True, slots=True)
class OrderSettings:
    """The `train` settings the order reads: seed and epoch_offsets key it, the others size it."""

    seed: int = 1337
    epoch_offsets: bool = True
    max_steps: int = 1
    global_batch_size: int = 1

    def __post_init__(self) -> None:
        for name in ("max_steps", "global_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")

    @property
    def positions(self) -> int:
        """Global positions a run of `max_steps` steps reads."""
        return self.max_steps * self.global_batch_size


@dataclass(kw_only=True, slots=True)
class WindowSize:
    block_size: int = 1

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError(f"model.block_size must be >= 1, got {self.block_size}")


@dataclass(slots=True)
class SampleIndexConfig:
    train: OrderSettings
    block_size: int


KEYED = ("train.seed", "train.epoch_offsets", "model.block_size")
SIZING = ("train.max_steps", "train.global_batch_size")


def parse(sections: dict) -> SampleIndexConfig:
    train = {p.removeprefix("train."): v for p, v in sections.items() if p.startswith("train.")}
    model = {"block_size": sections["model.block_size"]}
    return SampleIndexConfig(
        train=from_mapping(OrderSettings, train, "train"),
        block_size=from_mapping(WindowSize, model, "model").block_size,
    )


def covers(summary: dict, cfg: SampleIndexConfig) -> bool:
    """Whether a built index (its summary) holds every position the configured run reads."""
    return int(summary.get("positions", 0)) >= cfg.train.positions


@stage(
    name="sample_index",
    inputs=("tokenize",),
    config=KEYED,
    sizing=SIZING,
    covers=covers,
    parse_config=parse,
    version="1",
    num_cpus=1,
    mixture_fields={"weight": None},  # the mixture is applied here, and only here
)
def sample_index(ctx: StageContext) -> dict:
    from lmforge.pipeline.training.data.sample_index import ORDER, build_for_data

    cfg: SampleIndexConfig = ctx.config
    started = time.perf_counter()
    if ctx.sources:
        header = _build_mixture(ctx, cfg)
    else:
        header = build_for_data(
            ctx.out_dir,
            ctx.input("tokenize"),
            block_size=cfg.block_size,
            seed=cfg.train.seed,
            epoch_offsets=cfg.train.epoch_offsets,
            positions=cfg.train.positions,
        )
    summary = {
        "n_windows": header["n_windows"],
        "epochs": header["epochs"],
        "positions": header["epochs"] * header["n_windows"],
        "order_bytes": (ctx.out_dir / ORDER).stat().st_size,
        "build_s": round(time.perf_counter() - started, 3),
    }
    if "mixture" in header:
        summary["mixture"] = header["mixture"]
        summary["run_positions"] = cfg.train.positions
        for part in header["mixture"]:
            ctx.tracker.log_metrics(
                {f"{part['source']}/share_drawn": part["share_drawn"],
                 f"{part['source']}/epochs": part["epochs"]}
            )  # fmt: skip
    ctx.tracker.log_metrics({k: v for k, v in summary.items() if isinstance(v, int | float)})
    return summary


def _build_mixture(ctx: StageContext, cfg: SampleIndexConfig) -> dict:
    """The mixture's order: each source's windows drawn by its weight
    (`training/data/mixture.py`)."""
    from lmforge.pipeline.training.data.mixture import MixtureDataset, build_mixture_index
    from lmforge.pipeline.training.data.sampler import max_window_offset

    data = ctx.inputs_of("tokenize")
    max_offset = max_window_offset(cfg.block_size, cfg.train.epoch_offsets)
    dataset = MixtureDataset(list(data.values()), "train", cfg.block_size, max_offset)
    return build_mixture_index(
        ctx.out_dir,
        names=list(data),
        windows=dataset.windows,
        weights=[float(s["weight"]) for s in ctx.sources],
        seed=cfg.train.seed,
        max_offset=max_offset,
        positions=cfg.train.positions,
        block_size=cfg.block_size,
        data_fingerprint=dataset.fingerprint,
        run_positions=cfg.train.positions,
    )
