"""A bad data file, run through the real `lmforge` CLI as a user would: exit 1, exactly one
`lmforge: error:` line naming the file and the cause, no traceback (from lmforge or from the
Ray worker the stage ran in), and nothing in the store: no manifest, artifact or `.tmp-*`.

One case for each place a bad file is found (a path that matches nothing, a file refused before
it is read, a file that breaks part way); each cause, binary text, corrupt Parquet and cut
archives among them, is checked at the stage (`tests/stages/test_clean.py`), whose error the CLI
prints the same way. The file that breaks part way, inside the Ray worker that reads it, is run
in an `lmforge` process of its own: what reaches the terminal, the worker's output included, is
what a user sees. The other two call the CLI in this process (`main(argv)`), on one Ray runtime.
"""

from __future__ import annotations

import pytest
from cli_runner import lmforge, lmforge_here
from store_checks import error_lines, leftovers

pytestmark = pytest.mark.shares_ray

BAD_FILES = [
    ("empty.txt", b"", "is empty"),
    ("nowhere.txt", None, "matches no file"),
]


def _run_until_clean(tmp_path, name, content, run):
    bad = tmp_path / name
    if content is not None:
        bad.write_bytes(content)
    workdir = tmp_path / "runs"
    proc = run("run", "--until", "clean", f"workdir={workdir}", f"data.paths=[{bad}]", check=False)
    return bad, workdir, proc


def test_a_file_that_breaks_part_way_is_one_error_line_of_the_lmforge_process(tmp_path):
    content = b'{"text": "ok"}\n{"text": oops\n'
    bad, workdir, proc = _run_until_clean(tmp_path, "broken.jsonl", content, lmforge)
    assert proc.returncode == 1, proc.stdout
    errors = error_lines(proc.stdout)  # stdout and stderr together
    assert len(errors) == 1, proc.stdout
    assert str(bad) in errors[0] and "not valid JSON" in errors[0]
    assert "Traceback" not in proc.stdout
    assert leftovers(workdir / "store", "clean") == []


@pytest.mark.parametrize("name, content, cause", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_data_file_is_one_error_line_and_commits_nothing(tmp_path, name, content, cause):
    bad, workdir, called = _run_until_clean(tmp_path, name, content, lmforge_here)
    assert called.returncode == 1, called.stdout
    errors = error_lines(called.stdout)  # stdout and stderr together
    assert len(errors) == 1, called.stdout
    assert str(bad) in errors[0] and cause in errors[0]
    assert "Traceback" not in called.stdout
    assert leftovers(workdir / "store", "clean") == []
