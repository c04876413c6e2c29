"""A workdir written by lmforge 0.1.0 keeps working: every stage of its run is a cache hit, and its
pretrain resumes from its last checkpoint.

The fixture writes 0.1.0's on-disk formats itself, field by field, with no lmforge code: an
artifact is `store/<stage>/<key>/` whose `manifest.json` (indent 2, sorted keys) lists every file
with `bytes`, `sha256` and, past one block, the sha256 of each block; a checkpoint is
`checkpoints/pretrain/<lineage>/step_<6 digits>/` holding each rank's safetensors shards,
`layout.json`, `trainer_state.json` and `COMPLETE` (indent 1), which lists the shards with their
`xxh3_128` and the JSON files with their `sha256`. Keys and the lineage are the ones 0.1.0
computed for the tiny preset (tests/fixtures/cache_keys_0.1.0.json).

0.3.0 changed `clean`'s key on purpose (version 4: paragraph dedup, on by default), and with it
every key downstream: such a workdir recleans once. Everything else still holds, and is checked
here with `clean` declared as 0.1.0 declared it (`stages_as_of_0_1_0`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pytest
import torch
import xxhash
from safetensors.torch import save_file

from lmforge.model.config import ModelConfig
from lmforge.model.weights import weight_shapes
from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.plan import make_plan
from lmforge.pipeline.engine.stage import StageContext
from lmforge.pipeline.stages.pretrain.stage import lineage_key
from lmforge.pipeline.storage.artifact_store import open_store
from lmforge.pipeline.storage.settings import StoreSettings
from lmforge.pipeline.training.checkpoint.resume import check_layout, choose_checkpoint


def stages_as_of_0_1_0() -> dict:
    """Today's stages, `clean` at its 0.1.0 version and without paragraph dedup in its key."""
    stages = load_stages()
    paragraph = compose(["preset=tiny"])["data"]["dedup"]["paragraph"]
    stages["clean"] = dataclasses.replace(
        stages["clean"],
        version="3",
        unkeyed={**stages["clean"].unkeyed, "data.dedup.paragraph": paragraph},
    )
    return stages


FIXTURE = json.loads((Path(__file__).parents[2] / "fixtures" / "cache_keys_0.1.0.json").read_text())
KEYS = FIXTURE["stage_keys"]["tiny"]
LINEAGE = FIXTURE["pretrain_lineage"]["tiny"]
INPUTS = {
    "clean": [],
    "train_tokenizer": ["clean"],
    "tokenize": ["clean", "train_tokenizer"],
    "sample_index": ["tokenize"],
    "pretrain": ["tokenize", "sample_index", "train_tokenizer"],
    "harm": ["pretrain", "train_tokenizer", "clean", "tokenize"],
    "perplexity": ["pretrain", "tokenize", "train_tokenizer", "clean"],
    "sample": ["pretrain", "train_tokenizer"],
    "report": ["clean", "train_tokenizer", "pretrain", "perplexity", "sample", "harm"],
}
FILES = {
    "clean": {"train-00000.parquet": 3000, "val-00000.parquet": 700, "datasheet.md": 120},
    "train_tokenizer": {"tokenizer.json": 5000, "stats.json": 90},
    "tokenize": {"train-00000.tokens.bin": (5 << 20) // 2, "train-00000.shard.json": 200},
    "sample_index": {"order.bin": 80_000, "sample_index.json": 300},
    "pretrain": {"model/model.safetensors": 4000, "training_summary.json": 500},
    "harm": {"toxicity.jsonl": 900},
    "perplexity": {"perplexity.json": 200},
    "sample": {"samples.jsonl": 800},
    "report": {"model_card.md": 1500, "model_card.html": 2500},
}
SUMMARIES = {"sample_index": {"positions": 20_000, "epochs": 1, "n_windows": 21_000}}
BLOCK_BYTES = 1 << 20
"""The block size of this workdir's manifests (`cluster.store_block_mb=1` in 0.1.0)."""
TINY_MODEL = {
    "vocab_size": 256, "block_size": 128, "d_model": 128, "n_head": 4, "n_layer": 4,
    "d_ff": 512, "norm": "pre", "positions": "learned", "pos_base": 10000.0,
    "activation": "gelu_exact", "dropout": 0.0, "bias": True, "tie_weights": True,
    "layer_norm_eps": 1e-05,
}  # fmt: skip


def _entry(rel: str, data: bytes) -> dict:
    """A manifest file entry as 0.1.0 wrote it."""
    entry = {"path": rel, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    blocks = [data[i : i + BLOCK_BYTES] for i in range(0, len(data), BLOCK_BYTES)]
    if len(blocks) > 1:
        entry["blocks"] = {
            "bytes": BLOCK_BYTES,
            "sha256": [hashlib.sha256(b).hexdigest() for b in blocks],
        }
    return entry


def write_artifacts(store: Path, sections: dict[str, dict]) -> None:
    """Every artifact of a tiny run, committed as 0.1.0 committed them."""
    for number, (stage, key) in enumerate(KEYS.items()):
        final = store / stage / key
        entries = []
        for rel, size in sorted(FILES[stage].items()):
            data = bytes((number * 31 + i) % 251 for i in range(size))
            (final / rel).parent.mkdir(parents=True, exist_ok=True)
            (final / rel).write_bytes(data)
            entries.append(_entry(rel, data))
        manifest = {
            "stage": stage,
            "key": key,
            "version": load_stages()[stage].version,
            "config": sections[stage],
            "inputs": {
                name: {"key": KEYS[name], "path": str(store / name / KEYS[name])}
                for name in INPUTS[stage]
            },
            "summary": SUMMARIES.get(stage, {}),
            "mlflow_run_id": hashlib.md5(stage.encode()).hexdigest(),
            "started_at": 1764000000.0 + number,
            "finished_at": 1764000030.5 + number,
            "duration_s": 30.5,
            "estimate": {"measured_s": 30.5, "measured_peak_rss_mb": 512.0},
            "files": entries,
        }
        text = json.dumps(manifest, indent=2, sort_keys=True)
        (final / "manifest.json").write_text(text, encoding="utf-8")


def _record(data: bytes, algorithm: str) -> dict:
    digest = xxhash.xxh3_128(data) if algorithm == "xxh3_128" else hashlib.sha256(data)
    return {"bytes": len(data), algorithm: digest.hexdigest()}


def write_checkpoint(root: Path, step: int, shapes: dict[str, tuple[int, ...]]) -> None:
    """A sharded checkpoint of two ranks, each holding half of every parameter, as 0.1.0
    published it."""
    directory = root / f"step_{step:06d}"
    directory.mkdir(parents=True)
    listed, shards = {}, []
    for rank in range(2):
        suffix = f"{rank:05d}-of-00002.safetensors"
        model, optimizer, ranges = {}, {}, {}
        for name, shape in shapes.items():
            numel = math.prod(shape)
            start = 0 if rank == 0 else numel // 2
            count = numel // 2 if rank == 0 else numel - numel // 2
            values = torch.arange(start, start + count, dtype=torch.float32) * 1e-3 + step
            model[name] = values
            optimizer[f"exp_avg/{name}"] = values * 0.1
            optimizer[f"exp_avg_sq/{name}"] = values * 0.01
            ranges[name] = [start, count]
        for kind, tensors in (("model", model), ("optimizer", optimizer)):
            save_file(tensors, str(directory / f"{kind}-{suffix}"), {"format": "pt"})
            data = (directory / f"{kind}-{suffix}").read_bytes()
            listed[f"{kind}-{suffix}"] = _record(data, "xxh3_128")
        shards.append(
            {"model": f"model-{suffix}", "optimizer": f"optimizer-{suffix}", "ranges": ranges}
        )
    layout = {
        "format": "lmforge-sharded-1",
        "world_size": 2,
        "zero_stage": 2,
        "shapes": {name: list(shape) for name, shape in shapes.items()},
        "shards": shards,
    }
    state = {
        "step": step,
        "adam_step": step,
        "sampler_position": 16 * step,
        "tokens_seen": 2048 * step,
        "seed": 0,
        "n_windows": 21_000,
        "world_size": 2,
        "losses": [5.5 - 0.01 * i for i in range(step)],
        "model_config": TINY_MODEL,
    }
    texts = {
        "layout.json": json.dumps(layout, indent=1),
        "trainer_state.json": json.dumps(state, indent=1),
    }
    for name, text in texts.items():
        (directory / name).write_text(text)
        listed[name] = _record(text.encode(), "sha256")
    marker = json.dumps({"files": dict(sorted(listed.items()))}, indent=1)
    (directory / "COMPLETE").write_text(marker)


@pytest.fixture
def workdir_0_1_0(tmp_path) -> Path:
    """A tiny run's workdir as 0.1.0 left it: every artifact, two checkpoints of pretrain and the
    hidden directory of a third whose write was killed."""
    config = compose(["preset=tiny", f"workdir={tmp_path}", "cluster.store_block_mb=1"])
    plan = make_plan(Dag(stages_as_of_0_1_0()), config, open_store(None, tmp_path))
    sections = {n: plan.stages[n].sections for n in plan.order}
    del sections["clean"]["data"]["dedup"]["paragraph"]  # 0.1.0 had no such key
    write_artifacts(tmp_path / "store", sections)
    checkpoints = tmp_path / "checkpoints" / "pretrain" / LINEAGE
    shapes = weight_shapes(ModelConfig(**TINY_MODEL))
    for step in (400, 800):
        write_checkpoint(checkpoints, step, shapes)
    dead = checkpoints / ".step_001200.tmp-3f9c2a7e"
    dead.mkdir()
    (dead / "model-00000-of-00002.safetensors").write_bytes(b"half a shard")
    return tmp_path


@pytest.mark.parametrize("store_uri", [None, "file://{workdir}/store"])
def test_every_stage_of_a_0_1_0_run_is_a_cache_hit(workdir_0_1_0, store_uri):
    workdir = workdir_0_1_0
    uri = store_uri.format(workdir=workdir) if store_uri else None
    config = compose(["preset=tiny", f"workdir={workdir}"])
    settings = StoreSettings.from_cluster(config["cluster"], workdir)
    store = open_store(uri, workdir, settings)
    manifests = {p: p.read_bytes() for p in (workdir / "store").rglob("manifest.json")}
    plan = make_plan(Dag(stages_as_of_0_1_0()), config, store, verify=True)  # sha256 checked
    assert {name: plan.stages[name].action for name in plan.order} == dict.fromkeys(KEYS, "cached")
    assert {name: plan.stages[name].key for name in plan.order} == KEYS
    assert {p: p.read_bytes() for p in manifests} == manifests, "nothing rewritten"
    today = make_plan(Dag(load_stages()), config, store)
    assert {name: today.stages[name].action for name in today.order} == dict.fromkeys(KEYS, "run")


def test_a_0_1_0_pretrain_resumes_from_its_last_checkpoint(workdir_0_1_0):
    workdir = workdir_0_1_0
    config = compose(["preset=tiny", f"workdir={workdir}"])
    plan = make_plan(Dag(stages_as_of_0_1_0()), config, open_store(None, workdir))
    pretrain = plan.stages["pretrain"]
    store = open_store(None, workdir)
    ctx = StageContext(
        stage="pretrain",
        config=pretrain.typed_config,
        inputs={},
        input_manifests={n: store.manifest(n, k) for n, k in pretrain.input_keys.items()},
        out_dir=workdir / "out",
        tracker=None,
        workdir=workdir,
        key=pretrain.key,
    )
    checkpoint_dir = ctx.shared_location("checkpoints", "pretrain", lineage_key(ctx))
    assert checkpoint_dir == str(workdir / "checkpoints" / "pretrain" / LINEAGE)

    shapes = weight_shapes(pretrain.typed_config.model)
    everything = {name: (0, math.prod(shape)) for name, shape in shapes.items()}
    chosen = choose_checkpoint(checkpoint_dir, rank=0, world=1, ranges=everything)
    assert chosen is not None and Path(chosen.path).name == "step_000800"
    assert chosen.state.step == 800 and chosen.state.model_config == TINY_MODEL
    check_layout(chosen, shapes)  # the 0.1.0 shards hold today's tiny model, shape for shape
    half = math.prod(shapes["wte.weight"]) // 2
    values = chosen.layout.reader(chosen.directory)("exp_avg/wte.weight", half - 1, 2)
    assert torch.allclose(values, (torch.tensor([half - 1.0, half]) * 1e-3 + 800) * 0.1)
