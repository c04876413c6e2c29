"""Sliding-window negative log-likelihood: each token is predicted exactly once (F1)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lmforge.model.perplexity import (
    WindowPlan,
    position_nll,
    range_nll,
    sliding_windows,
    token_nll,
)


def test_one_window_equals_the_plain_forward_loss(make_model):
    model = make_model()
    ids = torch.randint(0, 97, (20,))
    _, loss = model(ids[None, :-1], ids[None, 1:])
    total, count = token_nll(model, ids, block_size=32, stride=32)
    assert count == 19
    assert math.isclose(total, loss.item() * 19, rel_tol=1e-5)


def test_non_overlapping_windows_sum_their_losses(make_model):
    model = make_model()
    ids = torch.randint(0, 97, (41,))  # windows ids[0:16], [16:32], [32:40] predict 40 tokens
    expected = 0.0
    for begin, end in [(0, 16), (16, 32), (32, 40)]:
        logits, _ = model(ids[None, begin:end])
        expected += F.cross_entropy(logits[0], ids[begin + 1 : end + 1], reduction="sum").item()
    total, count = token_nll(model, ids, block_size=16, stride=16)
    assert count == 40
    assert math.isclose(total, expected, rel_tol=1e-5)


def test_a_smaller_stride_predicts_each_token_once_with_enough_context():
    n, block, stride = 50, 16, 5
    scored = []
    for begin, end, done in sliding_windows(n, block, stride):
        targets = range(max(begin, done) + 1, end + 1)
        assert all(t - begin >= min(t, block - stride + 1) for t in targets)  # context length
        scored.extend(targets)
    assert scored == list(range(1, n))


def test_sliding_window_total_matches_scoring_each_token_separately(make_model):
    model = make_model()
    ids = torch.randint(0, 97, (45,))
    expected = 0.0
    for begin, end, done in sliding_windows(45, 16, 6):
        for t in range(max(begin, done) + 1, end + 1):  # -ln p(ids[t] | ids[begin:t])
            logits, _ = model(ids[None, begin:t])
            expected -= torch.log_softmax(logits[0, -1], dim=-1)[ids[t]].item()
    total, count = token_nll(model, ids, block_size=16, stride=6, batch_size=2)
    assert count == 44
    assert math.isclose(total, expected, rel_tol=1e-5)


def test_stride_larger_than_the_window_is_refused(make_model):
    with pytest.raises(ValueError, match="stride must be in"):
        token_nll(make_model(), torch.arange(10), block_size=8, stride=9)


def test_position_losses_are_each_tokens_own_loss_in_stream_order(make_model):
    model = make_model()
    ids = torch.randint(0, 97, (45,))
    losses = position_nll(model, ids, block_size=16, stride=6, batch_size=2)
    assert losses.shape == (44,) and losses.dtype == torch.float64
    for begin, end, done in sliding_windows(45, 16, 6):
        for t in range(max(begin, done) + 1, end + 1):  # losses[t - 1] = -ln p(ids[t] | ...)
            logits, _ = model(ids[None, begin:t])
            own = -torch.log_softmax(logits[0, -1], dim=-1)[ids[t]].item()
            assert math.isclose(losses[t - 1].item(), own, rel_tol=1e-5)
    total, count = token_nll(model, ids, block_size=16, stride=6)
    assert math.isclose(float(losses.sum()), total, rel_tol=1e-12) and count == 44


def _listed_windows(n_tokens: int, block: int, stride: int) -> list[tuple[int, int, int]]:
    """The windows listed one after another, as the scorer once built them."""
    windows, begin, done = [], 0, 0
    while done < n_tokens - 1:
        end = min(begin + block, n_tokens - 1)
        windows.append((begin, end, done))
        done, begin = end, begin + stride
    return windows


@pytest.mark.parametrize("n", [0, 1, 2, 16, 17, 18, 50, 333])
@pytest.mark.parametrize(("block", "stride"), [(16, 16), (16, 5), (16, 1), (8, 7)])
def test_window_k_in_closed_form_is_the_kth_window_of_the_listing(n, block, stride):
    plan = WindowPlan(n, block, stride)
    listed = _listed_windows(n, block, stride)
    assert plan.count == len(listed)
    assert [plan.window(k) for k in range(plan.count)] == listed


def test_ranges_of_windows_scored_apart_give_the_losses_of_the_whole(make_model):
    model = make_model()
    ids = torch.randint(0, 97, (201,))
    plan = WindowPlan(201, 16, 6)
    whole = position_nll(model, ids, block_size=16, stride=6, batch_size=4)
    pieces = []
    for first in range(0, plan.count, 7):
        stop = min(first + 7, plan.count)
        begin, end = plan.span(first, stop)
        start, scored_end = plan.scored(first, stop)
        part = range_nll(model, plan, first, stop, ids[begin:end], batch_size=4)
        assert part.numel() == scored_end - start
        pieces.append(part)
    torch.testing.assert_close(torch.cat(pieces), whole, rtol=1e-6, atol=1e-9)
