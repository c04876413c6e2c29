"""Bad input to the CLI: exactly one error line naming the cause (no traceback), a non-zero
exit, nothing started. Bad data files, which fail inside a stage, are in
tests/integration/test_bad_input_cli.py."""

from __future__ import annotations

import pytest
from store_checks import error_lines

from lmforge.pipeline.cli.main import main


@pytest.mark.parametrize(
    "args, code, named",
    [
        (["run", "train.lrr=1"], 2, "train.lrr"),
        (["run", "data.val_fraction=2"], 2, "data.val_fraction"),
        (["run", "data.on_error=bogus"], 2, "data.on_error"),
        (["run", "data.paths=notalist"], 2, "data.paths"),
        (["run", "preset=nope"], 2, "preset/nope"),
        (["run", "--until", "pretrian"], 2, "pretrian"),
        (["rerun", "pretrian"], 2, "pretrian"),
        (["status"], 1, "lmforge run"),
    ],
)
def test_bad_input_is_one_error_line_and_starts_nothing(workdir, capsys, args, code, named):
    assert main([*args, f"workdir={workdir}"]) == code
    out, err = capsys.readouterr()
    errors = error_lines(out + err)
    assert len(errors) == 1 and named in errors[0], out + err
    assert "Traceback" not in out + err
    assert not (workdir / "store").exists()
    assert not (workdir / "mlflow.db").exists()


@pytest.mark.parametrize("where", ["file", "below_a_file"])
def test_a_workdir_that_cannot_be_a_directory_is_one_error_line(tmp_path, capsys, where):
    (tmp_path / "afile").write_text("not a directory")
    workdir = tmp_path / "afile" if where == "file" else tmp_path / "afile" / "runs"
    assert main(["run", "--until", "clean", f"workdir={workdir}"]) == 1
    out, err = capsys.readouterr()
    errors = error_lines(out + err)
    assert len(errors) == 1 and str(workdir) in errors[0], out + err
    assert (tmp_path / "afile").read_text() == "not a directory"
