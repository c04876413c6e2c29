"""The files of a sharded checkpoint: one pair of safetensors shards per rank and a JSON layout.

    step_000123/
        model-00000-of-00002.safetensors      rank 0's ranges of the fp32 parameters (1-D)
        optimizer-00000-of-00002.safetensors  the same ranges of exp_avg/<name>, exp_avg_sq/<name>
        model-00001-of-00002.safetensors ...   rank 1's
        layout.json       every parameter's full shape and, per shard, the flat range
                          [start, numel] of each parameter it holds
        trainer_state.json, COMPLETE          as in `checkpoint`

A rank writes its two shards itself (`write_rank_shard`) from the regions it staged them in
(`staging`), hashing them as they are written (`digests`); each file's tensor data starts at a
multiple of 4096 bytes (the header is padded with spaces, as the format allows), so a local
store can write it with O_DIRECT (`direct_write`).
`Layout.read` returns any flat range of a saved tensor by reading only the overlapping pieces
from the shards (safetensors slices), so a rank of another world size or ZeRO stage reads just
what it holds. A checkpoint in the consolidated format (`model.safetensors` and
`optimizer.safetensors` holding full tensors) reads through the same `Layout`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from safetensors import safe_open

from lmforge.model.safetensors_stream import encode_header, spec_of
from lmforge.pipeline.training.checkpoint import marker as ckpt
from lmforge.pipeline.training.checkpoint.direct_write import ALIGN
from lmforge.pipeline.training.checkpoint.fragments import ADAM_MOMENTS
from lmforge.pipeline.training.checkpoint.staging import Staged

LAYOUT_FILE = "layout.json"
FORMAT = "lmforge-sharded-1"


def shard_names(rank: int, world: int) -> tuple[str, str]:
    """The model and optimizer shard file names of `rank`."""
    suffix = f"{rank:05d}-of-{world:05d}.safetensors"
    return f"model-{suffix}", f"optimizer-{suffix}"


@dataclass(slots=True)
class RankShard:
    """What one rank wrote: its two files (bytes, checksum) and the ranges they hold."""

    rank: int
    files: dict[str, dict]
    """File name -> {"bytes": n, "xxh3_128": hex} (see `storage.digests`)."""
    ranges: dict[str, list[int]]
    """Parameter name -> [start, numel] in the flattened parameter."""


class ShardWriter(Protocol):
    """A store's way to write one file of the pending checkpoint: its bytes and checksum."""

    def __call__(
        self,
        name: str,
        head: bytes,
        body: memoryview,
        *,
        midway: Callable[[], None] | None = None,
        split_at: int = 0,
    ) -> dict: ...


def write_rank_shard(
    write_file: ShardWriter,
    rank: int,
    world: int,
    staged: Staged,
    midway: Callable[[], None] | None = None,
) -> RankShard:
    """Write this rank's model and optimizer shards from its staged regions.

    midway: called between the first and second tensor of the model shard (fault drills).
    """
    model_name, optimizer_name = shard_names(rank, world)
    fragments = staged.fragments
    model_specs = [spec_of(f.name, f.values["param"]) for f in fragments]
    optimizer_specs = [
        spec_of(f"{key}/{f.name}", f.values[key]) for key in ADAM_MOMENTS for f in fragments
    ]
    drill = midway if len(model_specs) > 1 else None
    files = {}
    for name, specs, region, hook in (
        (model_name, model_specs, staged.model, drill),
        (optimizer_name, optimizer_specs, staged.optimizer, None),
    ):
        head = encode_header(specs, {"format": "pt"}, align=ALIGN)
        body = memoryview(region.detach().numpy()).cast("B")
        split_at = specs[0].nbytes if hook is not None else 0
        files[name] = write_file(name, head, body, midway=hook, split_at=split_at)
    ranges = {f.name: [f.start, f.numel] for f in fragments}
    return RankShard(rank=rank, files=files, ranges=ranges)


def layout_json(shapes: dict[str, tuple[int, ...]], shards: list[RankShard], stage: int) -> str:
    """The text of `layout.json` for the shards of every rank (in rank order)."""
    entries = []
    for shard in shards:
        model, optimizer = shard_names(shard.rank, len(shards))
        entries.append({"model": model, "optimizer": optimizer, "ranges": shard.ranges})
    layout = {
        "format": FORMAT,
        "world_size": len(shards),
        "zero_stage": stage,
        "shapes": {name: list(shape) for name, shape in shapes.items()},
        "shards": entries,
    }
    return json.dumps(layout, indent=1)


@dataclass(slots=True)
class Piece:
    """A flat range of a saved tensor held by one file."""

    file: str
    start: int
    numel: int


class Layout:
    """Where every flat range of every saved tensor lives in a checkpoint directory."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], shards: list[dict]) -> None:
        self.shapes = shapes
        self.pieces: dict[str, list[Piece]] = {name: [] for name in shapes}
        self.optimizer_file: dict[str, str] = {}
        for shard in shards:
            for name, (start, numel) in shard["ranges"].items():
                if name not in self.pieces:
                    raise ValueError(f"{LAYOUT_FILE} places {name}, which has no shape")
                self.pieces[name].append(Piece(shard["model"], start, numel))
                self.optimizer_file[shard["model"]] = shard["optimizer"]
        for name, pieces in self.pieces.items():
            pieces.sort(key=lambda piece: piece.start)
            _check_tiling(name, pieces, numel_of(shapes[name]))

    @classmethod
    def of(cls, directory: Path) -> Layout:
        """The layout of a checkpoint directory, sharded or consolidated."""
        if (directory / LAYOUT_FILE).is_file():
            layout = json.loads((directory / LAYOUT_FILE).read_text())
            shapes = {name: tuple(shape) for name, shape in layout["shapes"].items()}
            return cls(shapes, layout["shards"])
        with safe_open(str(directory / ckpt.MODEL_FILE), framework="pt") as f:
            shapes = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
        ranges = {name: [0, numel_of(shape)] for name, shape in shapes.items()}
        shard = {"model": ckpt.MODEL_FILE, "optimizer": ckpt.OPTIMIZER_FILE, "ranges": ranges}
        return cls(shapes, [shard])

    def files_for(self, ranges: dict[str, tuple[int, int]], *, optimizer: bool) -> set[str]:
        """The shard files holding any part of these parameter ranges."""
        files = set()
        for name, (start, numel) in ranges.items():
            for piece in self._overlapping(name, start, numel):
                files.add(piece.file)
                if optimizer:
                    files.add(self.optimizer_file[piece.file])
        return files

    def reader(self, directory: Path) -> ShardReader:
        return ShardReader(self, directory)

    def _overlapping(self, name: str, start: int, numel: int) -> list[Piece]:
        if name not in self.pieces:
            raise KeyError(f"the checkpoint has no parameter {name}")
        end = start + numel
        return [p for p in self.pieces[name] if p.start < end and start < p.start + p.numel]


class ShardReader:
    """Reads flat ranges of saved tensors from a checkpoint directory.

    Each read opens the files it needs and closes them after: the pages it mapped are not kept
    (an export reading every tensor in turn holds one tensor at a time, not the files)."""

    def __init__(self, layout: Layout, directory: Path) -> None:
        self.layout, self.directory = layout, directory

    def __call__(self, key: str, start: int, numel: int) -> torch.Tensor:
        """Elements [start, start + numel) of tensor `key` (a parameter or `<moment>/<name>`)."""
        moment, _, name = key.rpartition("/")
        out = torch.empty(numel)
        for piece in self.layout._overlapping(name, start, numel):
            lo, hi = max(start, piece.start), min(start + numel, piece.start + piece.numel)
            file = self.layout.optimizer_file[piece.file] if moment else piece.file
            with safe_open(str(self.directory / file), framework="pt") as f:
                part = _flat_range(f.get_slice(key), lo - piece.start, hi - piece.start)
            out[lo - start : hi - start] = part
        return out


def _flat_range(stored, lo: int, hi: int) -> torch.Tensor:
    """Elements [lo, hi) of a stored tensor flattened, reading only the rows that hold them."""
    shape = stored.get_shape()
    if len(shape) <= 1:
        return stored[lo:hi].reshape(-1).float()
    row = numel_of(shape[1:])
    first, last = lo // row, -(-hi // row)
    rows = stored[first:last].reshape(-1)
    return rows[lo - first * row : hi - first * row].float()


def _check_tiling(name: str, pieces: list[Piece], numel: int) -> None:
    position = 0
    for piece in pieces:
        if piece.start != position:
            raise ValueError(f"{LAYOUT_FILE}: the saved ranges of {name} do not tile it")
        position += piece.numel
    if position != numel:
        raise ValueError(f"{LAYOUT_FILE}: the saved ranges of {name} do not tile it")


def numel_of(shape: Iterable[int]) -> int:
    """Elements of a tensor of this shape."""
    count = 1
    for size in shape:
        count *= size
    return count
