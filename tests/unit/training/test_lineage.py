"""Where a pretrain run's checkpoints live: runs share a lineage only when one can continue the
other's trajectory exactly."""

from __future__ import annotations

import dataclasses

from lmforge.model.config import ModelConfig
from lmforge.pipeline.stages.pretrain.stage import lineage_of
from lmforge.pipeline.training.train_config import TrainConfig

MODEL = ModelConfig(vocab_size=256, block_size=32, d_model=32, n_head=2, n_layer=2, d_ff=64)
INPUTS = {"tokenize": "a" * 16, "sample_index": "b" * 16, "train_tokenizer": "c" * 16}


def _lineage(**train) -> str:
    base = {"lr": 3e-3, "min_lr": 3e-5, "warmup_steps": 5, "max_steps": 100, "num_workers": 2}
    return lineage_of(MODEL, TrainConfig(**(base | train)), INPUTS)


def test_a_decaying_cosine_run_with_more_steps_is_another_lineage():
    # Its rate at every step after warmup differs, so continuing the shorter run would not
    # reproduce it.
    assert _lineage(max_steps=150) != _lineage(max_steps=100)


def test_more_steps_continue_the_lineage_where_the_rate_ignores_them():
    assert _lineage(max_steps=150, min_lr=3e-3) == _lineage(max_steps=100, min_lr=3e-3)
    inverse_sqrt = {"schedule": "inverse_sqrt"}
    assert _lineage(max_steps=150, **inverse_sqrt) == _lineage(max_steps=100, **inverse_sqrt)


def test_worker_count_and_zero_stage_never_change_it_and_the_trajectory_always_does():
    assert _lineage(num_workers=1, zero_stage=3) == _lineage()
    assert _lineage(num_workers=1, local_mode=True) == _lineage()
    assert _lineage(lr=1e-3) != _lineage()
    assert _lineage(seed=1) != _lineage()
    other_data = dict(INPUTS, tokenize="d" * 16)
    config = TrainConfig(lr=3e-3, min_lr=3e-5, warmup_steps=5, max_steps=100, num_workers=2)
    assert lineage_of(MODEL, config, other_data) != lineage_of(MODEL, config, INPUTS)
    assert lineage_of(dataclasses.replace(MODEL, n_layer=3), config, INPUTS) != _lineage()


def _pretrain_context(workdir, *overrides: str):
    """The pretrain stage's context in a run of the tiny preset with `overrides`."""
    from lmforge.pipeline.config_tree import compose
    from lmforge.pipeline.engine.dag import Dag
    from lmforge.pipeline.engine.execute import load_stages
    from lmforge.pipeline.engine.plan import make_plan
    from lmforge.pipeline.engine.stage import StageContext
    from lmforge.pipeline.storage.artifact_store import open_store

    config = compose(["preset=tiny", f"workdir={workdir}", *overrides])
    pretrain = make_plan(Dag(load_stages()), config, open_store(None, workdir)).stages["pretrain"]
    return StageContext(
        stage="pretrain",
        config=pretrain.typed_config,
        inputs={},
        input_manifests={n: {"key": k} for n, k in pretrain.input_keys.items()},
        out_dir=workdir / "out",
        tracker=None,
        workdir=workdir,
        key=pretrain.key,
        pipeline_run="this-run",
        lease_wait_s=0,
    )


def test_runs_of_two_keys_of_one_lineage_never_train_from_its_checkpoints_at_once(tmp_path):
    """The lineage's checkpoints belong to the holder of its lease: a run of another key of the
    same lineage (here another keep_checkpoints) does not start training while it is held."""
    import pytest

    from lmforge.pipeline.engine.stage_leases import LeaseWaitExceeded
    from lmforge.pipeline.stages.pretrain.stage import lineage_key, pretrain
    from lmforge.pipeline.storage.leases.lease import Lease, Leases
    from lmforge.pipeline.storage.leases.lease_files import LocalLeaseFiles

    first = _pretrain_context(tmp_path)
    second = _pretrain_context(tmp_path, "train.keep_checkpoints=7")
    assert first.key != second.key and lineage_key(first) == lineage_key(second)
    name = f"checkpoints/pretrain/.{lineage_key(first)}.lease.json"
    holder = Leases(LocalLeaseFiles(tmp_path), run="the-first-run")
    assert isinstance(holder.acquire(name), Lease)  # the first run trains (this live process)
    try:
        for ctx in (first, second):  # before it reads anything: the inputs here are empty
            with pytest.raises(LeaseWaitExceeded, match="the checkpoints of lineage .* run the-f"):
                pretrain(ctx)
    finally:
        holder.close()
    assert not list(tmp_path.rglob("*.lease.json"))
