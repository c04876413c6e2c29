"""The mixture's order: every prefix draws each source's share to within one window, the same
positions whatever the chunking or the length it is built for, and a source too small for its
weight is repeated, each pass over all its windows, with its epochs reported."""

from __future__ import annotations

import numpy as np
import pytest

from lmforge.pipeline.training.data.mixture import build_mixture_index, drawn_counts, schedule
from lmforge.pipeline.training.data.sample_index import SampleIndex


@pytest.mark.parametrize("weights", [[0.7, 0.3], [1, 1, 1], [0.9, 0.05, 0.05], [3, 1]])
@pytest.mark.parametrize("positions", [1, 7, 100, 333, 4096])
def test_every_prefix_draws_each_share_to_within_one_window(weights, positions):
    counts = drawn_counts(weights, positions)
    assert counts.sum() == positions
    asked = np.asarray(weights) / sum(weights) * positions
    assert np.abs(counts - asked).max() < 1


def test_the_schedule_is_the_same_in_any_chunks_and_a_longer_one_starts_with_it():
    whole = np.concatenate(list(schedule([0.7, 0.3], 5000)))
    chunked = np.concatenate(list(schedule([0.7, 0.3], 5000, chunk=17)))
    longer = np.concatenate(list(schedule([0.7, 0.3], 9000)))
    assert (whole == chunked).all() and (longer[:5000] == whole).all()


def test_weights_must_be_positive():
    with pytest.raises(ValueError, match="> 0"):
        drawn_counts([1.0, 0.0], 10)


def build(tmp_path, positions: int, name: str = "index"):
    return build_mixture_index(
        tmp_path / name,
        names=["big", "small"],
        windows=[40, 3],
        weights=[0.5, 0.5],
        seed=7,
        max_offset=0,
        positions=positions,
        block_size=8,
        data_fingerprint="f",
        run_positions=positions,
    )


def test_a_small_source_is_repeated_pass_by_pass_and_its_epochs_reported(tmp_path):
    header = build(tmp_path, 60)
    index = SampleIndex(tmp_path / "index")
    windows = index.windows(0, 60)
    small = windows[windows >= 40] - 40
    assert small.size == 30  # half the positions, from 3 windows: 10 passes
    for k in range(0, 30, 3):  # each pass reads each of its windows once
        assert sorted(small[k : k + 3]) == [0, 1, 2]
    big = windows[windows < 40]
    assert len(set(big.tolist())) == big.size == 30
    parts = {p["source"]: p for p in header["mixture"]}
    assert parts["small"]["epochs"] == pytest.approx(10.0)
    assert parts["big"]["epochs"] == pytest.approx(0.75)
    assert parts["small"]["share_drawn"] == pytest.approx(0.5)


def test_an_index_built_for_more_positions_starts_with_the_same_windows(tmp_path):
    build(tmp_path, 60, "short")
    build(tmp_path, 200, "long")
    short, long = SampleIndex(tmp_path / "short"), SampleIndex(tmp_path / "long")
    assert (long.windows(0, 60) == short.windows(0, 60)).all()
