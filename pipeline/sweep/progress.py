"""The whole sweep's progress in one line: variants done, running and pending, and an ETA."""

from __future__ import annotations

import time

from lmforge.pipeline.sweep.records import DONE_STATES, SweepRecord


def eta_seconds(
    done_walls: list[float], running_elapsed: list[float], pending: int, slots: int
) -> float | None:
    """Seconds left: the variants to run and the rest of those running, each taking the mean
    wall time of the finished ones, spread over `slots` variants at a time; None before one
    has finished."""
    if not done_walls:
        return None
    mean = sum(done_walls) / len(done_walls)
    work = pending * mean + sum(max(mean - elapsed, 0.0) for elapsed in running_elapsed)
    return work / max(1, slots)


def progress_line(
    sweep_id: str,
    done: int,
    stopped: int,
    failed: int,
    running: int,
    pending: int,
    eta_s: float | None,
) -> str:
    total = done + stopped + failed + running + pending
    parts = [f"{done + stopped}/{total} done"]
    if stopped:
        parts[-1] += f" ({stopped} stopped early)"
    if failed:
        parts.append(f"{failed} failed")
    parts += [f"{running} running", f"{pending} pending"]
    eta = "-" if eta_s is None else _duration(eta_s)
    return f"{sweep_id}: {', '.join(parts)}, ETA {eta}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return time.strftime("%Hh%Mm", time.gmtime(seconds))
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def sweep_progress(record: SweepRecord, slots: int, now: float | None = None) -> str:
    """The progress line of a sweep's record, `slots` variants running at a time."""
    now = time.time() if now is None else now
    states = [v.state for v in record.variants]
    walls = [v.wall_s for v in record.variants if v.state in DONE_STATES and v.wall_s]
    elapsed = [now - (v.started_at or now) for v in record.variants if v.state == "running"]
    pending = states.count("pending")
    return progress_line(
        record.sweep_id,
        states.count("finished"),
        states.count("stopped"),
        states.count("failed"),
        states.count("running"),
        pending,
        eta_seconds(walls, elapsed, pending, slots),
    )
