"""Token-level unlikelihood (`train.unlikelihood`): the candidates, the term, and a training step
that applies it while still reporting cross-entropy."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lmforge.model.config import ModelConfig
from lmforge.pipeline.training.objectives.unlikelihood import (
    context_candidates,
    cross_entropy_and_unlikelihood,
    token_unlikelihood,
)
from lmforge.pipeline.training.train_config import TrainConfig
from lmforge.pipeline.training.train_step import TrainStep, build_engine


def _reference(logits: torch.Tensor, inputs: torch.Tensor, targets: torch.Tensor) -> float:
    """The paper's definition, one position at a time."""
    probs = logits.softmax(-1)
    total, count = 0.0, 0
    for b in range(inputs.size(0)):
        for t in range(inputs.size(1)):
            if targets[b, t] == -100:
                continue
            candidates = set(inputs[b, : t + 1].tolist()) - {int(targets[b, t])}
            total += sum(-math.log(1 - float(probs[b, t, c])) for c in candidates)
            count += 1
    return total / count


def test_candidates_are_the_distinct_context_tokens_but_the_target():
    inputs = torch.tensor([[3, 1, 3, 2]])
    targets = torch.tensor([[1, 3, 2, 4]])
    mask = context_candidates(inputs, targets)[0]
    chosen = [{int(inputs[0, s]) for s in range(4) if mask[t, s]} for t in range(4)]
    assert chosen == [{3}, {1}, {1, 3}, {1, 2, 3}]
    assert int(mask.sum()) == 7  # the repeated 3 counts once


def test_the_term_matches_the_definition_and_skips_unscored_positions():
    gen = torch.Generator().manual_seed(0)
    inputs = torch.randint(0, 12, (3, 10), generator=gen)
    targets = torch.randint(0, 12, (3, 10), generator=gen)
    targets[1, 4] = -100
    logits = torch.randn(3, 10, 15, generator=gen) * 2
    got = token_unlikelihood(logits.log_softmax(-1), inputs, targets)
    assert float(got) == pytest.approx(_reference(logits, inputs, targets), rel=1e-5)
    ce, _ = cross_entropy_and_unlikelihood(logits, inputs, targets)
    expected = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    assert float(ce) == pytest.approx(float(expected), rel=1e-6)


def test_its_gradient_lowers_only_the_candidates():
    inputs = torch.tensor([[5, 6, 5]])
    targets = torch.tensor([[6, 5, 7]])
    logits = torch.zeros(1, 3, 8, requires_grad=True)
    token_unlikelihood(logits.log_softmax(-1), inputs, targets).backward()
    # at the last position 5 and 6 are in the context and 7 is the target: a descent step
    # raises the logits of every other token against theirs
    grad = logits.grad[0, 2]
    assert grad[5] > 0 and grad[6] > 0
    assert all(grad[v] < 0 for v in (0, 1, 2, 3, 4, 7))


def test_a_negative_weight_is_refused():
    with pytest.raises(ValueError, match="train.unlikelihood"):
        TrainConfig(unlikelihood=-0.5)


@pytest.mark.slow
@pytest.mark.usefixtures("world_of_one")
def test_a_step_with_the_term_reports_cross_entropy_and_trains_away_from_the_context():
    model = ModelConfig(vocab_size=40, block_size=16, d_model=32, n_head=2, n_layer=2, d_ff=64)
    tokens = torch.randint(0, 40, (4, 17), generator=torch.Generator().manual_seed(3))
    x, y = tokens[:, :-1], tokens[:, 1:]
    after: dict[float, float] = {}
    for weight in (0.0, 1.0):
        cfg = TrainConfig(
            zero_stage=1, num_workers=1, global_batch_size=4, micro_batch_size=4, lr=1e-2,
            warmup_steps=0, unlikelihood=weight,
        )  # fmt: skip
        torch.manual_seed(0)
        engine = build_engine(model, cfg, 1, torch.device("cpu"))
        step = TrainStep(engine, cfg, torch.device("cpu"), 1)
        with torch.no_grad():
            logits, ce_before = engine.module(x, y)
        first = step([(x, y)], lr=1e-2)
        assert first.loss == pytest.approx(float(ce_before), rel=1e-5)  # not CE + the term
        if weight:
            term = token_unlikelihood(logits.log_softmax(-1), x, y)
            assert first.unlikelihood == pytest.approx(float(term), rel=1e-5)
        else:
            assert first.unlikelihood is None
        for _ in range(30):
            step([(x, y)], lr=1e-2)
        with torch.no_grad():
            logits, _ = engine.module(x)
        after[weight] = float(token_unlikelihood(logits.log_softmax(-1), x, y))
    assert after[1.0] < 0.7 * after[0.0], after
