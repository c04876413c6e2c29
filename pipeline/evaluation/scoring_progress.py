"""What a scoring stage tells the user while it runs: a progress line with rate and ETA, and the
rate as an MLflow metric.

perplexity: 1.2M/20.0M tokens (6%) 45.1k tok/s ETA 7m02s
perplexity: 3.0k/10.0k documents (30%) 120 documents/s ETA 58s
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from lmforge.pipeline.engine.stage import Tracker
from lmforge.pipeline.quantities import format_duration
from lmforge.pipeline.training.reporting.progress import format_rate

log = logging.getLogger(__name__)


def scoring_line(
    what: str, done: int, total: int, per_s: float, eta_s: float, unit: str = "tokens"
) -> str:
    """One line of scoring progress."""
    share = 100 * done / total if total else 100.0
    rate_unit = "tok" if unit == "tokens" else unit
    return (
        f"{what}: {format_rate(done)}/{format_rate(total)} {unit} ({share:.0f}%) "
        f"{format_rate(per_s)} {rate_unit}/s ETA {format_duration(eta_s)}"
    )


class ScoringProgress:
    """Counts what was scored (`unit`: tokens or documents); every `every_s` seconds logs
    `scoring_line` and records `score_<unit>_per_s` (step: the count so far) in the stage's
    MLflow run.

    The rate runs from the first result on, so the actors' start-up does not count in the ETA
    (until a second result arrives, it runs from the start).
    """

    def __init__(
        self,
        what: str,
        total: int,
        tracker: Tracker | None = None,
        every_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        unit: str = "tokens",
    ) -> None:
        self.what, self.total, self.tracker, self.every_s = what, total, tracker, every_s
        self.unit = unit
        self.done = 0
        self._clock = clock
        self._started = clock()
        self._first: tuple[float, int] | None = None
        self._last_report = self._started

    def advance(self, n: int) -> None:
        """`n` more were scored."""
        now = self._clock()
        self.done += n
        if self._first is None:
            self._first = (now, self.done)
            self._last_report = now
        elif now - self._last_report >= self.every_s:
            self._last_report = now
            self.report()

    def tokens_per_s(self) -> float:
        """Units (tokens) per second since the first result; while there is only that one (a
        small split scored in one call), since the start, start-up included: a lower bound,
        never 0 once something was scored."""
        if self._first is None:
            return 0.0
        now = self._clock()
        first_at, first_done = self._first
        if self.done > first_done and now > first_at:
            return (self.done - first_done) / (now - first_at)
        elapsed = now - self._started
        return self.done / elapsed if elapsed > 0 else 0.0

    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def report(self) -> str:
        rate = self.tokens_per_s()
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        line = scoring_line(self.what, self.done, self.total, rate, eta, self.unit)
        log.info("%s", line)
        if self.tracker is not None:
            self.tracker.log_metrics({f"score_{self.unit}_per_s": rate}, step=self.done)
        return line
