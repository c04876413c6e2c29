"""The `clean` stage's work directory: what its tasks pass each other, kept across an
interruption so the next run of the same plan resumes from the tasks that finished.

With a local store it lives under the workdir (shared storage); with a bucket store, in the
bucket under `resume/clean/<key>/`, each node working in a mirror in its node cache
(`shared_dir`). The artifact's own files go straight into the store (`ctx.output`); the stage
marks its temporary directory resumable so they outlive a crash too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import asdict
from pathlib import Path

from lmforge.pipeline.engine.stage import StageContext
from lmforge.pipeline.sources.read_plan import ReadUnit
from lmforge.pipeline.stages.clean.partition import CleanDirs
from lmforge.pipeline.storage.location import is_bucket

log = logging.getLogger(__name__)


def plan_record(units: list[ReadUnit]) -> dict:
    """What a resumed run must find unchanged: the units, and each source file's size and
    modification time."""
    files = {}
    for unit in units:
        for piece in unit.pieces:
            if Path(piece.path).is_file():
                stat = Path(piece.path).stat()
                files[piece.path] = [stat.st_size, stat.st_mtime_ns]
    return json.loads(json.dumps({"units": [asdict(u) for u in units], "files": files}))


def work_dir(ctx: StageContext, record: dict) -> CleanDirs:
    """Where the tasks keep what they pass each other: under the workdir (shared storage) with
    a local store; with a bucket, in the bucket, each node working in a local mirror."""
    if not is_bucket(ctx.store_uri):
        return CleanDirs(str(ctx.workdir / "resume" / "clean" / ctx.key))
    generation = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:12]
    return CleanDirs(
        str(Path(ctx.store.cache.dir) / "work" / "clean" / ctx.key),
        remote=ctx.shared_location("resume", "clean", ctx.key),
        cache=ctx.store.cache,
        generation=generation,
    )


def open_work_dir(ctx: StageContext, record: dict) -> CleanDirs:
    """The key's work directory, resumed when an earlier run of the same plan left one (its
    files in the artifact's temporary place are kept for that: `ctx.keep_for_resume`)."""
    dirs = work_dir(ctx, record)
    plan = Path(dirs.root) / "plan.json"
    previous = dirs.done_result(plan)
    if previous != record:
        if previous is not None:
            log.warning("clean: the sources changed since the interrupted run; starting over")
        dirs.remove()
        _clear_outputs(ctx.out_dir)
    else:
        log.info("clean: resuming the interrupted run's finished tasks from %s", dirs.root)
    dirs.make()
    dirs.mark_done(plan, record)
    ctx.keep_for_resume()
    return dirs


def _clear_outputs(out_dir: Path) -> None:
    """Drop an earlier plan's files from the artifact's temporary directory (not the engine's)."""
    for path in out_dir.iterdir():
        if path.name.startswith(".lmforge-"):
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
