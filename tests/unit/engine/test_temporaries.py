"""The temp-directory sweep removes only work whose owner is dead, so pipelines sharing a store
path never delete each other's running stage."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from lmforge.pipeline.storage.artifact_store import ArtifactStore
from lmforge.pipeline.storage.temporaries import OWNER_FILE, RESUMABLE_MARKER, current_owner

BEGIN_AND_WAIT = (
    "import sys; from lmforge.pipeline.storage.artifact_store import ArtifactStore; "
    "print(ArtifactStore(sys.argv[1]).begin('clean', 'abc'), flush=True); sys.stdin.read()"
)


def _temporaries(root):
    return list(root.glob("*/.tmp-*"))


def test_another_pipelines_running_stage_is_kept_until_its_process_dies(tmp_path):
    other = subprocess.Popen(
        [sys.executable, "-c", BEGIN_AND_WAIT, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        tmp = other.stdout.readline().strip()
        assert tmp and os.path.isdir(tmp)
        assert ArtifactStore(tmp_path).sweep_temporaries() == 0  # this pipeline's start-up sweep
        assert os.path.isdir(tmp)
    finally:
        other.stdin.close()
        other.wait(timeout=60)
    assert ArtifactStore(tmp_path).sweep_temporaries() == 1
    assert not _temporaries(tmp_path)


def test_a_temporary_of_this_live_process_is_kept(tmp_path):
    store = ArtifactStore(tmp_path)
    tmp = store.begin("clean", "abc")
    assert store.sweep_temporaries() == 0 and tmp.is_dir()


def test_a_reused_pid_is_not_mistaken_for_the_owner(tmp_path):
    store = ArtifactStore(tmp_path)
    tmp = store.begin("clean", "abc")
    owner = dict(current_owner(), start_ticks=current_owner()["start_ticks"] - 1)
    (tmp / OWNER_FILE).write_text(json.dumps(owner))
    assert store.sweep_temporaries() == 1


def test_another_hosts_temporary_is_kept_unless_very_old(tmp_path):
    store = ArtifactStore(tmp_path)
    tmp = store.begin("clean", "abc")
    owner = dict(current_owner(), host=socket.gethostname() + "-elsewhere", pid=1)
    (tmp / OWNER_FILE).write_text(json.dumps(owner))
    assert store.sweep_temporaries() == 0
    eight_days_ago = time.time() - 8 * 24 * 3600
    for path in (tmp / OWNER_FILE, tmp):
        os.utime(path, (eight_days_ago, eight_days_ago))
    assert store.sweep_temporaries() == 1


def test_an_unclaimed_temporary_is_swept_only_once_old(tmp_path):
    store = ArtifactStore(tmp_path)
    tmp = tmp_path / "clean" / ".tmp-abc-legacy"
    tmp.mkdir(parents=True)
    assert store.sweep_temporaries() == 0
    two_hours_ago = time.time() - 7200
    os.utime(tmp, (two_hours_ago, two_hours_ago))
    assert store.sweep_temporaries() == 1


def test_a_dead_runs_resumable_work_is_kept(tmp_path):
    store = ArtifactStore(tmp_path)
    tmp = store.begin("clean", "abc")
    (tmp / OWNER_FILE).write_text(json.dumps(dict(current_owner(), start_ticks=-1)))
    (tmp / RESUMABLE_MARKER).write_text("")
    assert store.sweep_temporaries() == 0 and tmp.is_dir()


def test_the_owner_record_is_not_part_of_the_committed_artifact(tmp_path):
    store = ArtifactStore(tmp_path)
    tmp = store.begin("clean", "abc")
    (tmp / "a.txt").write_text("x")
    final = store.commit(tmp, "clean", "abc", {})
    assert not (final / OWNER_FILE).exists()
    assert [f["path"] for f in store.manifest("clean", "abc")["files"]] == ["a.txt"]
