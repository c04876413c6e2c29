"""Sequence-level unlikelihood (`train.sequence_unlikelihood`): the repeats it finds, the term,
the greedy continuations it scores, the steps it runs on, and a training step that applies it."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.model.config import ModelConfig
from lmforge.model.generate import SamplingConfig, generate
from lmforge.model.gpt import GPT
from lmforge.pipeline.stages.pretrain.stage import parse, trajectory_neutral
from lmforge.pipeline.training.objectives.sequence_unlikelihood import (
    GreedyDecoder,
    greedy_continuations,
    looping_rows,
    repeated_ngram_mask,
    sequence_unlikelihood,
)
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import TrainStep, build_engine


def test_the_mask_marks_the_tokens_of_ngrams_seen_before_in_the_row():
    rows = torch.tensor([[1, 2, 3, 4, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9]])
    mask = repeated_ngram_mask(rows, 4)
    assert mask[0].tolist() == [False] * 4 + [True] * 4 + [False]
    assert not mask[1].any()
    # one token repeated: every 2-gram after the first is a repeat of it
    assert repeated_ngram_mask(torch.tensor([[7, 7, 7, 7]]), 2)[0].tolist() == [
        False,
        True,
        True,
        True,
    ]
    assert not repeated_ngram_mask(torch.tensor([[1, 1, 1]]), 4).any()  # shorter than n


def test_the_term_matches_the_definition():
    gen = torch.Generator().manual_seed(0)
    prefix, vocab = 3, 6
    sequences = torch.randint(0, 3, (2, 15), generator=gen)  # few tokens: many repeats
    logits = torch.randn(2, 14, vocab, generator=gen) * 2
    got = sequence_unlikelihood(logits, sequences, prefix, n=2)
    probs = logits.softmax(-1)
    total, positions = 0.0, 0
    for b in range(2):
        cont = sequences[b, prefix:].tolist()
        seen: set[tuple[int, ...]] = set()
        marked = [False] * len(cont)
        for i in range(len(cont) - 1):
            gram = tuple(cont[i : i + 2])
            if gram in seen:
                marked[i] = marked[i + 1] = True
            seen.add(gram)
        for k, token in enumerate(cont):
            positions += 1
            if marked[k]:  # p(token at prefix + k) comes from the logits one position earlier
                total += -math.log(1 - float(probs[b, prefix + k - 1, token]))
    assert total > 0
    assert float(got) == pytest.approx(total / positions, rel=1e-5)


def test_continuations_are_the_models_greedy_tokens_after_the_prefix():
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocab_size=30, block_size=24, d_model=16, n_head=2, n_layer=1, d_ff=32))
    prefixes = torch.randint(0, 30, (3, 5), generator=torch.Generator().manual_seed(1))
    sequences = greedy_continuations(model, prefixes, 10)
    assert sequences.shape == (3, 15)
    assert torch.equal(sequences[:, :5], prefixes)
    expected = generate(model, prefixes.tolist(), SamplingConfig(max_new_tokens=10, greedy=True))
    assert sequences[:, 5:].tolist() == expected
    assert model.training  # decoding leaves the training mode as it was


def test_the_term_runs_on_the_last_steps_only():
    cfg = TrainConfig(max_steps=100, sequence_unlikelihood=1.0, sequence_unlikelihood_steps=10)
    assert [cfg.sequence_term_at(s) for s in (0, 89, 90, 99)] == [False, False, True, True]
    off = TrainConfig(max_steps=100, sequence_unlikelihood_steps=10)
    assert not any(off.sequence_term_at(s) for s in range(100))
    assert (cfg.sequence_phase_start, off.sequence_phase_start) == (90, 100)
    longer = TrainConfig(max_steps=5, sequence_unlikelihood=1.0, sequence_unlikelihood_steps=10)
    assert longer.sequence_phase_start == 0


def test_every_kth_step_of_the_phase_adds_the_term_from_its_first():
    cfg = TrainConfig(
        max_steps=100,
        sequence_unlikelihood=2.0,
        sequence_unlikelihood_steps=10,
        sequence_unlikelihood_every=3,
    )
    assert [s for s in range(100) if cfg.sequence_term_at(s)] == [90, 93, 96, 99]
    with pytest.raises(ValueError, match="sequence_unlikelihood_every"):
        TrainConfig(sequence_unlikelihood_every=0)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="train.sequence_unlikelihood must be >= 0"):
        TrainConfig(sequence_unlikelihood=-1.0, sequence_unlikelihood_steps=5)
    with pytest.raises(ValueError, match="needs train.sequence_unlikelihood_steps >= 1"):
        TrainConfig(sequence_unlikelihood=0.5)
    model = {"block_size": 64, "d_model": 32, "n_head": 2, "n_layer": 1, "d_ff": 64}
    term = {"sequence_unlikelihood": 1.0, "sequence_unlikelihood_steps": 5}
    with pytest.raises(ValueError, match="= 96 must be <= model.block_size = 64"):
        parse(
            {
                "model": model,
                "train": {
                    **term,
                    "sequence_unlikelihood_prefix": 32,
                    "sequence_unlikelihood_tokens": 64,
                },
            }
        )
    with pytest.raises(ValueError, match="train.sequence_unlikelihood_prefix must be an integer"):
        TrainConfig(**term, sequence_unlikelihood_prefix=0)
    # unset lengths follow the window: a quarter of it as prefix, half of it decoded
    assert parse({"model": model, "train": term}).train.sequence_decoding(64) == (16, 32)
    assert TrainConfig(**term).sequence_decoding(128) == (32, 64)


def test_with_the_term_max_steps_is_part_of_the_lineage():
    """Which steps carry the term depends on max_steps: a finished run continued to more steps
    is not the run given those steps from the start."""
    constant = {"lr": 1e-3, "min_lr": 1e-3}
    assert "max_steps" in trajectory_neutral(TrainConfig(**constant))
    with_term = TrainConfig(**constant, sequence_unlikelihood=1.0, sequence_unlikelihood_steps=5)
    assert "max_steps" not in trajectory_neutral(with_term)


def _greedy_repeat_share(model: GPT, prefixes: torch.Tensor, new_tokens: int) -> float:
    sequences = greedy_continuations(model, prefixes, new_tokens)
    return float(repeated_ngram_mask(sequences[:, prefixes.size(1) :], 4).float().mean())


def _chain_text(rows: int, length: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Text where 0, 1 and 2 are each followed by the next of them (2 by 0) more often than by
    any other token: a model that learns it loops through 0 1 2 when decoding greedily."""
    tokens = torch.zeros(rows, length + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, 12, (rows,), generator=gen)
    for t in range(1, length + 1):
        previous = tokens[:, t - 1]
        follow = torch.rand(rows, generator=gen) < 0.5
        other = torch.randint(0, 12, (rows,), generator=gen)
        tokens[:, t] = torch.where(follow, torch.where(previous < 3, (previous + 1) % 3, 0), other)
    return tokens[:, :-1], tokens[:, 1:]


@pytest.mark.slow
@pytest.mark.usefixtures("world_of_one")
def test_steps_with_the_term_report_it_and_train_the_greedy_loops_away():
    model = ModelConfig(vocab_size=12, block_size=32, d_model=32, n_head=2, n_layer=2, d_ff=64)
    prompts, _ = _chain_text(32, 8, torch.Generator().manual_seed(4))
    shares: dict[float, float] = {}
    terms: dict[float, float] = {}
    for weight in (0.0, 1.0):
        cfg = TrainConfig(
            zero_stage=1, num_workers=1, global_batch_size=32, micro_batch_size=32, lr=3e-3,
            warmup_steps=0, max_steps=90, sequence_unlikelihood=weight,
            sequence_unlikelihood_steps=30 if weight else 0, sequence_unlikelihood_prefix=8,
            sequence_unlikelihood_tokens=24,
        )  # fmt: skip
        torch.manual_seed(0)
        engine = build_engine(model, cfg, 1, torch.device("cpu"))
        step = TrainStep(engine, cfg, torch.device("cpu"), 1)
        gen = torch.Generator().manual_seed(3)
        for s in range(cfg.max_steps):
            if s == 60:  # the same model in both runs so far: the loops it falls into
                loops = greedy_continuations(engine.module, prompts, 24)
            x, y = _chain_text(32, 32, gen)  # new text every step: nothing to memorise
            result = step([(x, y)], lr=3e-3, sequence_term=cfg.sequence_term_at(s))
            if cfg.sequence_term_at(s):
                assert result.sequence_unlikelihood is not None
                assert result.sequence_unlikelihood >= 0
                assert 0 <= result.looping_share <= 1
                assert (result.sequence_unlikelihood > 0) == (result.looping_share > 0)
            else:
                assert result.sequence_unlikelihood is None
                assert result.looping_share is None
        with torch.no_grad():
            logits, _ = engine.module(loops[:, :-1])
        terms[weight] = float(sequence_unlikelihood(logits, loops, 8, n=4))
        shares[weight] = _greedy_repeat_share(engine.module, prompts, 24)
    # cross-entropy alone keeps looping; the term makes the repeats of step 60 unlikely and
    # greedy decoding repeats less
    assert shares[0.0] > 0.5 and terms[0.0] > 0.3, (shares, terms)
    assert terms[1.0] < 0.3 * terms[0.0], terms
    assert shares[1.0] < shares[0.0] - 0.1, shares


@pytest.mark.usefixtures("world_of_one")
def test_only_the_rows_that_loop_go_through_the_second_pass_and_the_term_is_unchanged():
    """The rows whose continuation repeats no 4-gram add nothing to the term: the step forwards
    only the others, and the term and its gradient are those of the whole micro-batch."""
    model = ModelConfig(vocab_size=64, block_size=32, d_model=32, n_head=2, n_layer=2, d_ff=64)
    cfg = TrainConfig(
        zero_stage=1, num_workers=1, global_batch_size=16, micro_batch_size=16, warmup_steps=0,
        max_steps=1, sequence_unlikelihood=1.0, sequence_unlikelihood_steps=1,
        sequence_unlikelihood_prefix=8, sequence_unlikelihood_tokens=12,
    )  # fmt: skip
    torch.manual_seed(0)
    engine = build_engine(model, cfg, 1, torch.device("cpu"))
    step = TrainStep(engine, cfg, torch.device("cpu"), 1)
    gen = torch.Generator().manual_seed(2)
    x = torch.randint(0, 64, (16, 32), generator=gen)
    # the continuations the decoding is made to return: rows 0-5 loop, the others repeat no
    # 4-gram (12 distinct tokens each), so the selection is known whatever the model decodes
    continuations = torch.stack([torch.randperm(64, generator=gen)[:12] for _ in range(16)])
    continuations[:6] = torch.tensor([5, 6, 7, 8] * 3)
    step._greedy_continuations = lambda x: (8, torch.cat([x[:, :8], continuations[: len(x)]], 1))
    sequences = torch.cat([x[:, :8], continuations], 1)
    loops = looping_rows(sequences, 8, n=4)
    assert loops.tolist() == [True] * 6 + [False] * 10

    forwarded: list[int] = []  # the engine's forwards: the decoding runs the module itself
    hook = engine.register_forward_pre_hook(lambda _, args: forwarded.append(len(args[0])))
    term, share = step._sequence_term(x)
    assert share == pytest.approx(6 / 16)
    hook.remove()
    assert forwarded == [int(loops.sum())]
    params = list(engine.module.parameters())
    grads = torch.autograd.grad(term, params, allow_unused=True)
    logits, _ = engine.module(sequences[:, :-1])
    whole = sequence_unlikelihood(logits, sequences, 8, n=4)
    expected = torch.autograd.grad(whole, params, allow_unused=True)
    assert float(term) == pytest.approx(float(whole), rel=1e-5)
    assert float(term) > 0
    for got, want in zip(grads, expected, strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)

    # a micro-batch none of whose rows loops: no second pass at all, and a term of zero
    continuations = continuations[6:]
    calm = x[6:]
    forwarded.clear()
    hook = engine.register_forward_pre_hook(lambda _, args: forwarded.append(len(args[0])))
    assert step._sequence_term(calm) == (0.0, 0.0)
    hook.remove()
    assert forwarded == []


@pytest.mark.slow
@pytest.mark.usefixtures("world_of_one")
def test_under_zero3_the_term_is_the_one_zero1_gives():
    """ZeRO-3 holds each parameter as a partition: decoding with it gives the continuations,
    and the term, that the same model gives under ZeRO-1."""
    model = ModelConfig(vocab_size=12, block_size=32, d_model=32, n_head=2, n_layer=2, d_ff=64)
    x, y = _chain_text(4, 32, torch.Generator().manual_seed(5))
    terms = {}
    for stage in (1, 3):
        cfg = TrainConfig(
            zero_stage=stage, num_workers=1, global_batch_size=4, micro_batch_size=4,
            warmup_steps=0, max_steps=2, sequence_unlikelihood=1.0, sequence_unlikelihood_steps=2,
            sequence_unlikelihood_prefix=8, sequence_unlikelihood_tokens=24,
        )  # fmt: skip
        torch.manual_seed(0)
        engine = build_engine(model, cfg, 1, torch.device("cpu"))
        step = TrainStep(engine, cfg, torch.device("cpu"), 1)
        terms[stage] = [step([(x, y)], lr=1e-2, sequence_term=True).sequence_unlikelihood]
        # the ETA's one timed decoding (rank 0 alone): none under ZeRO-3, whose decoding
        # gathers from every rank; it draws no random numbers, and the next step is unchanged
        rng = torch.get_rng_state()
        probe = step.decoding_seconds(x)
        assert (probe is None) if stage == 3 else (probe > 0)
        assert torch.equal(torch.get_rng_state(), rng)
        terms[stage].append(step([(x, y)], lr=1e-2, sequence_term=True).sequence_unlikelihood)
        if stage == 3:  # decoded by a plain replica, built without drawing from training's RNG
            rng = torch.get_rng_state()
            decoder = GreedyDecoder(engine.module)
            assert torch.equal(decoder(x[:, :8], 24), step._decoder(x[:, :8], 24))
            assert torch.equal(torch.get_rng_state(), rng)
            assert not any(hasattr(p, "ds_id") for p in decoder._replica.parameters())
    assert terms[1][0] > 0
    assert terms[3] == pytest.approx(terms[1], rel=1e-4), terms
