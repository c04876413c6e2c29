"""Ray Train's storage, a directory of each pipeline run's own: `ray_storage/<pipeline run id>/`.

Ray Train keeps its copies of reported checkpoints and its run state there (under the workdir, or
under the bucket with a bucket store). Runs that share a workdir or a bucket never share this
directory: each run writes `ray_storage/<id>.owner.json`, its driver's owner record, removes its
directory when it ends, and removes the directories of runs whose driver is dead on this host (a
driver killed before it could, or interrupted while its tasks still wrote). A dead driver of
another host is not known dead here: its directory stays until a run on its host, or a person,
removes it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from lmforge.pipeline.storage.file_store import open_files
from lmforge.pipeline.storage.location import shared_location
from lmforge.pipeline.storage.temporaries import owner_alive

RAY_STORAGE = "ray_storage"
OWNER_SUFFIX = ".owner.json"


def ray_storage(workdir: str, store_uri: str | None) -> str:
    """Where every run's Ray Train storage lives (`StageContext.shared_location`'s rule)."""
    return shared_location(workdir, store_uri, RAY_STORAGE)


def claim(location: str, run_id: str, driver: dict[str, Any]) -> None:
    """Record `driver` as the owner of the run's directory under `location`."""
    open_files(location).write_bytes(run_id + OWNER_SUFFIX, json.dumps(driver).encode())


def release(location: str, run_id: str, *, keep_owner: bool = False) -> None:
    """Remove the run's directory and then its owner record. `keep_owner`: a run that ends
    while its tasks may still write (interrupted) keeps the record, so that the next run
    removes whatever they wrote after."""
    files = open_files(location)
    with contextlib.suppress(OSError):  # nothing was written there, or the store refuses
        files.delete_dir(run_id)
    if not keep_owner:
        files.delete_file(run_id + OWNER_SUFFIX)


def sweep_dead(location: str) -> int:
    """Remove the directories of runs whose driver is dead on this host; returns how many."""
    files = open_files(location)
    removed = 0
    for name in files.sizes():
        if not name.endswith(OWNER_SUFFIX):
            continue
        try:
            owner = json.loads(files.read_bytes(name) or b"{}")
        except ValueError:
            continue  # torn by a crash mid-write: judged by a person
        if isinstance(owner, dict) and "pid" in owner and owner_alive(owner) is False:
            release(location, name.removesuffix(OWNER_SUFFIX))
            removed += 1
    return removed


def claim_for_run(workdir: str, store_uri: str | None, run_id: str, driver: dict[str, Any]) -> str:
    """The run's own Ray Train storage location, claimed for `driver` once the storage of dead
    drivers' runs is removed."""
    location = ray_storage(workdir, store_uri)
    removed = sweep_dead(location)
    if removed:
        logging.getLogger("lmforge").info(
            "removed the Ray Train storage of %d run(s) of a dead driver", removed
        )
    claim(location, run_id, driver)
    return location
