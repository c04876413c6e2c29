"""Scoring progress: tokens done, rate from the first result on, and the time left."""

from __future__ import annotations

import logging

from lmforge.pipeline.evaluation.scoring_progress import ScoringProgress, scoring_line


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Metrics:
    def __init__(self) -> None:
        self.logged: list[tuple[dict, int | None]] = []

    def log_metrics(self, metrics, step=None) -> None:
        self.logged.append((dict(metrics), step))


def test_the_line_names_tokens_share_rate_and_eta():
    line = scoring_line("perplexity", 1_200_000, 20_000_000, 45_100.0, 422.0)
    assert line == "perplexity: 1.2M/20.0M tokens (6%) 45.1k tok/s ETA 7m02s"
    line = scoring_line("perplexity", 3_000, 10_000, 120.0, 58.0, unit="documents")
    assert line == "perplexity: 3.0k/10.0k documents (30%) 120 documents/s ETA 58s"


def test_rate_leaves_out_the_start_up_and_eta_follows_it(caplog):
    clock, metrics = Clock(), Metrics()
    progress = ScoringProgress("perplexity", 100_000, metrics, every_s=10, clock=clock)
    clock.now = 30.0  # the actors start: no token yet
    progress.advance(1_000)
    with caplog.at_level(logging.INFO):
        for _ in range(4):
            clock.now += 5.0
            progress.advance(1_000)  # 200 tokens/s
    assert progress.tokens_per_s() == 200.0
    assert progress.done == 5_000
    assert [step for _, step in metrics.logged] == [3_000, 5_000]  # every 10 s
    assert metrics.logged[-1][0] == {"score_tokens_per_s": 200.0}
    assert "5.0k/100.0k tokens (5%) 200 tok/s ETA 7m55s" in caplog.text


def test_a_split_scored_in_one_result_gets_its_rate_from_the_start():
    clock = Clock()
    progress = ScoringProgress("perplexity", 4_096, every_s=30, clock=clock)
    assert progress.tokens_per_s() == 0.0  # nothing scored yet
    clock.now = 8.0  # the actors start and score everything in one call
    progress.advance(4_096)
    assert progress.tokens_per_s() == 512.0  # 4,096 tokens in 8 s, not 0
    assert "4.1k/4.1k tokens (100%) 512 tok/s ETA 0s" in progress.report()
    clock.now = 10.0
    progress.advance(0)  # a later empty result leaves the rate from the start
    assert progress.tokens_per_s() == 4_096 / 10.0
