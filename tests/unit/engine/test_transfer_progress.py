"""A large upload or download logs how far it is, its rate and the time left; a small one is
quiet."""

from __future__ import annotations

import logging

from lmforge.pipeline.storage import transfers as transfer_progress
from lmforge.pipeline.storage.transfers import TransferProgress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_large_transfer_logs_bytes_rate_and_time_left(monkeypatch, caplog):
    clock = Clock()
    monkeypatch.setattr(transfer_progress.time, "monotonic", clock)
    caplog.set_level(logging.INFO, logger="lmforge")
    progress = TransferProgress("uploading tokenize/abc", 4_000_000_000)
    clock.now += 10
    progress.add(1_000_000_000)  # 100 MB/s: 30 s left
    clock.now += 1
    progress.add(100_000_000)  # within 5 s of the last line: quiet
    assert [r.getMessage() for r in caplog.records] == [
        "uploading tokenize/abc: 1.0 GB of 4.0 GB (25%), 100.0 MB/s, ETA 30s"
    ]
    clock.now += 54
    progress.add(2_900_000_000)  # the rest
    progress.finish()
    assert caplog.records[-1].getMessage() == "uploading tokenize/abc: 4.0 GB in 1m05s (61.5 MB/s)"


def test_a_small_transfer_is_quiet(monkeypatch, caplog):
    clock = Clock()
    monkeypatch.setattr(transfer_progress.time, "monotonic", clock)
    caplog.set_level(logging.INFO, logger="lmforge")
    progress = TransferProgress("downloading a manifest", 10_000)
    clock.now += 60
    progress.add(10_000)
    progress.finish()
    assert not caplog.records
