"""A bad data file, run through the real `lmforge` CLI as a user would: exit 1, exactly one
`lmforge: error:` line naming the file and the cause, no traceback (from lmforge or from the
Ray worker the stage ran in), and nothing in the store: no manifest, artifact or `.tmp-*`.

One case for each place a bad file is found (a path that matches nothing, a file refused before
it is read, a file that breaks part way); each cause, binary text, corrupt Parquet and cut
archives among them, is checked at the stage (`tests/stages/test_clean.py`), whose error the CLI
prints the same way. Each case here is a CLI process and a Ray runtime: about 30 s."""

from __future__ import annotations

import pytest
from cli_runner import lmforge
from store_checks import error_lines, leftovers

BAD_FILES = [
    ("empty.txt", b"", "is empty"),
    ("broken.jsonl", b'{"text": "ok"}\n{"text": oops\n', "not valid JSON"),
    ("nowhere.txt", None, "matches no file"),
]


@pytest.mark.parametrize("name, content, cause", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_data_file_is_one_error_line_and_commits_nothing(tmp_path, name, content, cause):
    bad = tmp_path / name
    if content is not None:
        bad.write_bytes(content)
    workdir = tmp_path / "runs"
    proc = lmforge(
        "run", "--until", "clean", f"workdir={workdir}", f"data.paths=[{bad}]", check=False
    )
    assert proc.returncode == 1, proc.stdout
    errors = error_lines(proc.stdout)  # stdout and stderr together
    assert len(errors) == 1, proc.stdout
    assert str(bad) in errors[0] and cause in errors[0]
    assert "Traceback" not in proc.stdout
    assert leftovers(workdir / "store", "clean") == []
