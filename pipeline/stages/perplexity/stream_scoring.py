"""Scoring a token stream over the model pool: ranges of windows go out, `RangeSums` come back.

The coordinator sends each actor only a range of window numbers; the actor reads the range's ids
from the token shards itself, scores them with the model (and the n-gram baselines, and for the
first ranges the freshly initialised model), sums the losses by document group and returns those
sums. Windows and stride are those of `model.perplexity.WindowPlan` over the whole stream, so the
figures equal one process scoring the stream in one pass, and ranges are combined in order, so
they do not depend on the number of actors.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from lmforge.pipeline.evaluation.model_pool import ModelPool, ModelWorker
from lmforge.pipeline.evaluation.scoring_progress import ScoringProgress
from lmforge.pipeline.probes.stream_sums import (
    RangeSums,
    StreamSums,
    document_groups,
    n_groups,
    range_sums,
)
from lmforge.pipeline.stages.perplexity.token_stream import StreamSpec, TokenStream


@dataclass(frozen=True, slots=True)
class StreamJob:
    """What every range of one scoring shares (put in the object store once)."""

    stream: StreamSpec
    block_size: int
    stride: int
    batch_size: int
    """Windows per forward pass."""
    max_groups: int
    """Document groups of the bootstrap at most (see `stream_sums`)."""
    baselines: dict[str, Any]
    """n-gram scorers by name (`probes.ngram`), scored on the same positions as the model."""
    init_ranges: int
    """Ranges, from the first, that the freshly initialised model also scores."""


@dataclass(frozen=True, slots=True)
class WindowRange:
    """Windows [first, stop) of a job: one actor call."""

    job_key: str
    job: Any
    """The job's object reference."""
    index: int
    first: int
    stop: int


def score_stream(
    pool: ModelPool, job: StreamJob, windows_per_range: int, progress: ScoringProgress | None
) -> StreamSums:
    """Every window of the job's stream, scored on the pool; the combined sums."""
    import ray

    from lmforge.model.perplexity import WindowPlan

    plan = WindowPlan(job.stream.n_tokens, job.block_size, job.stride)
    key, ref = uuid.uuid4().hex, ray.put(job)
    ranges = (
        WindowRange(key, ref, i, first, min(first + windows_per_range, plan.count))
        for i, first in enumerate(range(0, plan.count, windows_per_range))
    )
    sums = StreamSums(n_groups(job.stream.n_docs, job.max_groups))
    for part in pool.map(score_range, ranges):
        sums.add(part)
        if progress is not None:
            progress.advance(part.totals["model"][1])
    return sums


def ranges_for_tokens(tokens: int, windows_per_range: int, stride: int) -> int:
    """Ranges from the first that cover at least `tokens` predicted positions (0 = all)."""
    if not tokens:
        return 1 << 62
    return -(-tokens // (windows_per_range * stride))


class _JobState:
    """An actor's side of a job: the opened stream, byte counts, baselines, the initial model."""

    def __init__(self, worker: ModelWorker, job: StreamJob) -> None:
        from lmforge.tokenizer.describe import token_byte_lengths

        self.job = job
        self.stream = TokenStream(job.stream)
        self.byte_lengths = token_byte_lengths(worker.trained.tok)
        self._worker = worker
        self._initial = None

    def initial_model(self):
        """The model as `GPT(config)` builds it after `torch.manual_seed(0)`, built once."""
        import torch

        from lmforge.model.gpt import GPT

        if self._initial is None:
            torch.manual_seed(0)
            config = self._worker.trained.model.config
            self._initial = GPT(config).to(self._worker.device).eval()
        return self._initial


def _state(worker: ModelWorker, item: WindowRange) -> _JobState:
    """The job's state in this actor, set up on its first range (one job kept at a time)."""
    import ray

    key, state = worker.cache.get("stream_job", (None, None))
    if key != item.job_key:
        state = _JobState(worker, ray.get(item.job))
        worker.cache["stream_job"] = (item.job_key, state)
    return state


def score_range(worker: ModelWorker, item: WindowRange) -> RangeSums:
    """In an actor: the sums of windows [first, stop) of the job's stream."""
    import torch

    from lmforge.model.perplexity import WindowPlan, range_nll

    state = _state(worker, item)
    job = state.job
    plan = WindowPlan(job.stream.n_tokens, job.block_size, job.stride)
    begin, end = plan.span(item.first, item.stop)
    start, stop = plan.scored(item.first, item.stop)  # predicts ids[i + 1], start <= i < stop
    low = max(min(begin, start - 1), 0)  # one id before the first prediction, for the trigram
    ids = state.stream.read(low, end)
    window_ids = torch.from_numpy(ids[begin - low :])

    def losses(model) -> np.ndarray:
        nll = range_nll(model, plan, item.first, item.stop, window_ids, batch_size=job.batch_size)
        return nll.numpy()

    prev, token = ids[start - low : stop - low], ids[start + 1 - low : stop + 1 - low]
    grouped = {"model": losses(worker.trained.model)}
    for name, lm in job.baselines.items():
        before = ids[start - 1 - low : stop - 1 - low] if start else np.r_[lm.vocab_size, prev[:-1]]
        grouped[name] = -lm.log_probs(before, prev, token)
    docs = state.stream.documents(np.arange(start + 1, stop + 1))
    groups = document_groups(docs, job.stream.n_docs, job.max_groups)
    ungrouped = {"init": losses(state.initial_model())} if item.index < job.init_ranges else None
    n_bytes = int(state.byte_lengths[token].sum())
    return range_sums(item.index, grouped, groups, n_bytes, ungrouped)
