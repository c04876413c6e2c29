"""Decoding: greedy and its limits (T15), top-p's smallest set (E5), the KV cache, batching,
seeding and stopping at the end-of-sequence token (T16, E8)."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.model.generate import SamplingConfig, filter_logits, generate

PROMPTS = [[5, 17, 33, 2, 8, 61], [40], [7, 7, 90]]


def _kept(logits: torch.Tensor) -> set[int]:
    return {i for i, value in enumerate(logits.tolist()) if value != float("-inf")}


def test_top_k_keeps_the_k_largest_logits():
    logits = torch.tensor([1.0, 3.0, 2.0, 0.5, -1.0])
    assert _kept(filter_logits(logits, top_k=2)) == {1, 2}
    assert _kept(filter_logits(logits, top_k=1)) == {1}
    assert _kept(filter_logits(logits, top_k=0)) == {0, 1, 2, 3, 4}


@pytest.mark.parametrize(
    ("top_p", "kept"),
    [(1e-9, {1}), (0.45, {1}), (0.75, {1, 3}), (0.85, {1, 3, 0}), (0.93, {1, 3, 0, 2})],
)
def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p(top_p, kept):
    probs = torch.tensor([0.10, 0.50, 0.05, 0.30, 0.05])
    assert _kept(filter_logits(probs.log(), top_p=top_p)) == kept


def test_temperature_divides_the_logits():
    logits = torch.tensor([[1.0, -2.0, 4.0]])
    assert torch.allclose(filter_logits(logits, temperature=2.0), logits / 2)
    low = torch.softmax(filter_logits(logits, temperature=0.1), dim=-1)
    high = torch.softmax(filter_logits(logits, temperature=10.0), dim=-1)
    assert low.max() > torch.softmax(logits, dim=-1).max() > high.max()


def _greedy(model, prompts=PROMPTS, **kwargs):
    return generate(model, prompts, SamplingConfig(max_new_tokens=20, greedy=True, **kwargs))


def _sample(model, prompts=PROMPTS, **kwargs):
    return generate(model, prompts, SamplingConfig(max_new_tokens=20, **{"seed": 1, **kwargs}))


def test_greedy_picks_the_argmax_of_the_next_token_logits(make_model):
    model = make_model()
    out = _greedy(model, [PROMPTS[0]])[0]
    sequence = PROMPTS[0] + out
    for step, token in enumerate(out):
        logits, _ = model(torch.tensor([sequence[: len(PROMPTS[0]) + step]]))
        assert token == int(logits[0, -1].argmax())
    assert len(set(out)) > 3  # the fixture model does not just repeat one token


@pytest.mark.parametrize("limit", [{"top_k": 1}, {"top_p": 1e-9}, {"temperature": 1e-6}], ids=str)
def test_sampling_limits_reduce_to_greedy_decoding(make_model, limit):
    model = make_model()
    assert _sample(model, **limit) == _greedy(model)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_kv_cache_output_equals_recomputing_the_context(make_model, norm):
    model = make_model(norm=norm, positions="sinusoidal" if norm == "post" else "learned")
    assert _greedy(model, use_cache=True) == _greedy(model, use_cache=False)
    assert _sample(model, use_cache=True) == _sample(model, use_cache=False)


def test_kv_cache_falls_back_to_cropping_past_the_context_length(make_model):
    model = make_model(block_size=16)
    long = SamplingConfig(max_new_tokens=30, greedy=True)  # prompt + 30 > 16 positions
    cached = generate(model, PROMPTS, long)
    recomputed = generate(
        model, PROMPTS, SamplingConfig(max_new_tokens=30, greedy=True, use_cache=False)
    )
    assert cached == recomputed
    assert [len(row) for row in cached] == [30, 30, 30]
    too_long_prompt = [list(range(1, 25))]  # longer than block_size: cropped to the last 16
    expected = generate(
        model, [too_long_prompt[0][-16:]], SamplingConfig(max_new_tokens=1, greedy=True)
    )
    assert (
        generate(model, too_long_prompt, SamplingConfig(max_new_tokens=1, greedy=True)) == expected
    )


@pytest.mark.parametrize("use_cache", [True, False])
def test_batched_generation_equals_one_prompt_at_a_time(make_model, use_cache):
    model = make_model(block_size=16)  # 20 new tokens: crosses the context limit too
    batched = _greedy(model, use_cache=use_cache)
    assert batched == [_greedy(model, [p], use_cache=use_cache)[0] for p in PROMPTS]
    sampled = _sample(model, seed=5, use_cache=use_cache)
    alone = [_sample(model, [p], seed=5 + i, use_cache=use_cache)[0] for i, p in enumerate(PROMPTS)]
    assert sampled == alone  # row i samples with seed + i


def test_same_seed_gives_the_same_sample_and_another_seed_does_not(make_model):
    model = make_model()
    assert _sample(model, seed=11) == _sample(model, seed=11)
    assert _sample(model, seed=11) != _sample(model, seed=12)


def test_a_row_stops_after_emitting_the_end_of_sequence_token(make_model):
    model = make_model()
    free = _greedy(model)
    eos = free[0][4]
    stop = free[0].index(eos)
    stopped = generate(model, PROMPTS, SamplingConfig(max_new_tokens=20, greedy=True), eos_id=eos)
    assert stopped[0] == free[0][: stop + 1]  # eos included, nothing after it
    for row, out in zip(free, stopped, strict=True):
        assert out == (row[: row.index(eos) + 1] if eos in row else row)


def test_generation_restores_training_mode_and_checks_its_inputs(make_model):
    model = make_model().train()
    assert generate(model, PROMPTS, SamplingConfig(max_new_tokens=0)) == [[], [], []]
    assert model.training
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, [[]], SamplingConfig())
    with pytest.raises(ValueError, match="must be in"):
        generate(model, [[1, 97]], SamplingConfig())


def test_sampling_follows_the_model_distribution(make_model):
    model = make_model(vocab_size=5)
    prompt = [1, 2]
    logits, _ = model(torch.tensor([prompt]))
    probs = torch.softmax(logits[0, -1], dim=-1)
    draws = generate(model, [prompt] * 2000, SamplingConfig(max_new_tokens=1, seed=0))
    freq = torch.bincount(torch.tensor([d[0] for d in draws]), minlength=5).float() / 2000
    assert torch.allclose(freq, probs, atol=4 * math.sqrt(0.25 / 2000))


@pytest.mark.parametrize(
    ("field", "value"), [("temperature", 0.0), ("top_k", -1), ("top_p", 0.0), ("top_p", 1.5)]
)
def test_sampling_config_rejects_out_of_range_values(field, value):
    with pytest.raises(ValueError, match=field):
        SamplingConfig(**{field: value})
