"""ZeRO's bytes per parameter and Megatron's activation count, as the estimate uses them."""

from __future__ import annotations

import pytest

from lmforge.pipeline.training.memory import (
    BUCKET_ELEMENTS,
    CHECKPOINT_STAGED_BYTES_PER_PARAM,
    activation_bytes,
    model_state_bytes,
    rank_memory,
)

PSI = 1e9


@pytest.mark.parametrize(
    ("stage", "bytes_per_param"),
    [(0, 16), (1, 4 + 4 + 8 / 8), (2, 4 + (4 + 8) / 8), (3, 16 / 8)],
)
def test_each_zero_stage_shards_what_the_paper_says(stage, bytes_per_param):
    device, host = model_state_bytes(PSI, stage, 8, False, False)
    buckets = 2 * 4 * BUCKET_ELEMENTS if stage else 0
    assert sum(device.values()) == pytest.approx(bytes_per_param * PSI + buckets)
    assert host == {}


def test_offloading_moves_the_optimizer_and_parameters_to_the_host():
    device, host = model_state_bytes(PSI, 3, 4, True, True)
    assert host == {"optimizer": pytest.approx(8 * PSI / 4), "params": pytest.approx(PSI)}
    assert "optimizer" not in device and "params" not in device


def test_buckets_never_exceed_the_model():
    device, _ = model_state_bytes(1000, 2, 2, False, False)
    assert device["buckets"] == 2 * 4 * 1000


def test_activations_follow_korthikanti_and_fused_attention_drops_the_score_matrix():
    s, b, h, a, layers, vocab = 2048, 4, 2048, 16, 24, 50257
    logits = 2 * 4.0 * s * b * vocab
    full = activation_bytes(
        seq=s,
        micro_batch=b,
        d_model=h,
        n_head=a,
        n_layer=layers,
        vocab=vocab,
        half_precision=True,
        fused_attention=False,
    )
    assert full == pytest.approx(layers * s * b * h * (34 + 5 * a * s / h) + logits)
    fused = activation_bytes(
        seq=s,
        micro_batch=b,
        d_model=h,
        n_head=a,
        n_layer=layers,
        vocab=vocab,
        half_precision=True,
        fused_attention=True,
    )
    assert fused == pytest.approx(layers * s * b * h * 34 + logits)
    fp32 = activation_bytes(
        seq=s,
        micro_batch=b,
        d_model=h,
        n_head=a,
        n_layer=layers,
        vocab=vocab,
        half_precision=False,
        fused_attention=True,
    )
    assert fp32 - logits == pytest.approx(2 * (fused - logits))


def test_a_rank_stages_only_its_share_of_a_checkpoint():
    memory = rank_memory(
        params=PSI,
        zero_stage=3,
        world=64,
        offload_optimizer=False,
        offload_params=False,
        activations=0.0,
    )
    assert memory.host["checkpoint staging"] == CHECKPOINT_STAGED_BYTES_PER_PARAM * PSI / 64
    assert memory.device_bytes == pytest.approx(16 * PSI / 64 + 2 * 4 * BUCKET_ELEMENTS)
