"""tests/cpu_by_test.py: which cgroup a process accounts its CPU in (`bench/suite_time.py`'s
lookup, which the plugin makes its group in), and the table by file."""

from __future__ import annotations

import json

from bench_modules import load_bench
from cpu_by_test import by_file, main

own_cgroup = load_bench("suite_time").own_cgroup

V1 = "12:cpu,cpuacct:/user.slice/session-3.scope\n4:memory:/user.slice\n0::/user.slice\n"
V2 = "0::/user.slice/user-1000.slice/session-3.scope\n"


def test_the_cpuacct_hierarchy_where_v1_mounts_it_else_the_unified_one():
    hierarchy, path = own_cgroup(V1)
    assert path == "/user.slice/session-3.scope"
    assert hierarchy in ("cpuacct", "cpu,cpuacct")  # the folder this machine mounts it as
    assert own_cgroup(V2) == ("", "/user.slice/user-1000.slice/session-3.scope")


def test_tests_add_up_by_file_most_cpu_first():
    rows = [
        {"id": "tests/a.py::test_one", "cpu_s": 1.25, "wall_s": 2.0},
        {"id": "tests/b.py::test_one[x]", "cpu_s": 4.0, "wall_s": 3.0},
        {"id": "tests/a.py::test_two", "cpu_s": 1.0, "wall_s": 1.5},
    ]
    assert by_file(rows) == [
        {"file": "tests/b.py", "cpu_s": 4.0, "wall_s": 3.0, "tests": 1},
        {"file": "tests/a.py", "cpu_s": 2.2, "wall_s": 3.5, "tests": 2},
    ]


def test_the_table_of_a_rows_file(tmp_path, monkeypatch, capsys):
    rows = tmp_path / "cpu.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"id": f"tests/f{i}.py::t", "cpu_s": float(i), "wall_s": 1.0}) + "\n"
            for i in range(1, 5)
        )
    )
    monkeypatch.setattr("sys.argv", ["cpu_by_test.py", str(rows), "--top", "2"])
    main()
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == "4 tests, 10 CPU-s"
    assert shown[3:] == [
        "| `tests/f4.py` | 4 | 40% | 1 | 1 |",
        "| `tests/f3.py` | 3 | 30% | 1 | 1 |",
    ]
