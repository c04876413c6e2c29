"""Bad input to the CLI: one line naming the cause, non-zero exit, nothing started."""

from __future__ import annotations

from lmforge.pipeline.cli import main


def test_bad_override_fails_before_any_stage_and_names_the_key(workdir, capsys):
    code = main(["run", "train.lrr=1", f"workdir={workdir}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "train.lrr" in err and len(err.splitlines()) == 1
    assert not (workdir / "store").exists()
    assert not (workdir / "mlflow.db").exists()


def test_unknown_stage_for_rerun_names_the_valid_stages(workdir, capsys):
    code = main(["rerun", "pretrian", f"workdir={workdir}"])
    assert code == 2
    assert "pretrian" in capsys.readouterr().err


def test_status_without_any_run_says_what_to_do(workdir, capsys):
    code = main(["status", f"workdir={workdir}"])
    assert code == 1
    assert "lmforge run" in capsys.readouterr().err


def test_missing_data_path_is_one_clear_line(workdir, capsys):
    code = main(
        ["run", "--until", "clean", f"workdir={workdir}", "data.paths=[/nonexistent/x.txt]"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert "/nonexistent/x.txt" in err[-1]
