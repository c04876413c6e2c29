"""tests/cpu_by_process.py: what a process is from its command line, which title it keeps, the
sums by kind, and a real busy child read from /proc."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from cpu_by_process import XDIST_WORKER, Poller, Seen, by_kind, kind_of, specificity, table

PY = "python3.11"


@pytest.mark.parametrize(
    ("cmdline", "kind"),
    [
        (["ray::RayTrainWorker.init_train_context"], "ray::RayTrainWorker"),
        (["ray::TrainController.run"], "ray::TrainController"),
        (["ray::stage:clean"], "ray::stage:clean"),
        (["ray::IDLE"], "ray::IDLE"),
        (["ray::_tokenize_group"], "ray::_tokenize_group"),
        ([PY, "-m", "lmforge.pipeline.cli.main", "run"], "python -m lmforge.pipeline.cli.main"),
        ([PY, "-u", "-c", XDIST_WORKER], "pytest worker"),
        ([PY, "-c", "import ray"], "python -c"),
        ([PY, "/x/ray/_private/log_monitor.py", "--logs-dir=/tmp"], "python log_monitor.py"),
        ([PY], "python"),
        ([f"{PY} -c import sys; print(['/x/site-packages'])"], "python -c"),
        (["/x/ray/core/src/ray/raylet/raylet", "--raylet_socket_name=x"], "raylet"),
        ([], "?"),
    ],
)
def test_a_process_is_named_by_its_ray_title_or_its_command(cmdline, kind):
    assert kind_of(cmdline) == kind


def test_an_actors_or_tasks_title_outranks_an_idle_workers_which_outranks_a_command():
    assert specificity("ray::stage:pretrain") > specificity("ray::IDLE") > specificity("raylet")
    assert specificity("python default_worker.py") == specificity("?")


def test_sums_by_kind_most_cpu_first_and_the_table_shows_each_processs_share():
    seen = [Seen("ray::RayTrainWorker", 700), Seen("ray::RayTrainWorker", 800), Seen("raylet", 50)]
    rows = by_kind(seen, ticks_per_s=100)
    assert rows == [
        {"kind": "ray::RayTrainWorker", "processes": 2, "cpu_s": 15.0},
        {"kind": "raylet", "processes": 1, "cpu_s": 0.5},
    ]
    printed = table(rows, wall_s=20.0, top=10)
    assert printed.splitlines()[0] == "3 processes, 16 CPU-s in 20 s"
    assert "| `ray::RayTrainWorker` | 2 | 15 | 7.50 | 97% |" in printed


def test_a_busy_child_is_read_from_proc_under_its_title_and_earlier_processes_are_left_out():
    poller = Poller()
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"
    child = subprocess.Popen(["bash", "-c", f'exec -a ray::Busy.run {sys.executable} -c "{busy}"'])
    while child.poll() is None:
        poller.sample()
        time.sleep(0.05)
    rows = {r["kind"]: r for r in poller.by_kind()}
    assert rows["ray::Busy"]["processes"] == 1
    assert 0.3 <= rows["ray::Busy"]["cpu_s"] <= 1.5
    assert "pytest worker" not in rows  # this process started before the poller
