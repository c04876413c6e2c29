"""`lmforge estimate` on the command line: at once, without Ray, torch, DeepSpeed or MLflow, one
line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

from lmforge.pipeline.cli.main import main

CLUSTER = ["--nodes", "64", "--cpus-per-node", "32", "--memory-per-node", "512GB"]


def test_estimate_answers_without_importing_torch_ray_deepspeed_or_mlflow():
    code = (
        "import sys, json, io, contextlib\n"
        "from lmforge.pipeline.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(['estimate', '--docs', '1e9', '--bytes', '1TB', '--nodes', '64',"
        " '--cpus-per-node', '32', '--json'])\n"
        "data = json.loads(out.getvalue())\n"
        "heavy = [m for m in ('torch', 'ray', 'deepspeed', 'mlflow') if m in sys.modules]\n"
        "print(code, data['bound_stage'], heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    code, bound, heavy = done.stdout.split(maxsplit=2)
    assert (code, heavy.strip()) == ("0", "[]")
    assert bound in {"clean", "train_tokenizer", "tokenize", "pretrain", "perplexity", "harm"}


def test_json_names_the_bounding_stage_and_the_cluster(capsys):
    assert main(["estimate", "--docs", "1e9", "--bytes", "1TB", *CLUSTER, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cluster"]["nodes"] == 64 and data["cluster"]["memory_per_node"] == 512 * 10**9
    assert data["corpus"] == {"docs": 10**9, "bytes": 10**12}
    assert (
        data["bound_stage"]
        == max(
            (s for s in data["stages"] if s["stage"] in data["critical_path"]),
            key=lambda s: s["wall_s"],
        )["stage"]
    )


def test_the_table_names_the_bound_and_what_to_change(capsys):
    args = ["estimate", "--bytes", "1TB", *CLUSTER, "tokenizer.sample_bytes=0"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "bounded by" in out and "clean" in out and "pretrain" in out
    assert "DOES NOT FIT: train_tokenizer" in out and "change tokenizer.sample_bytes=" in out


def test_a_bad_size_is_one_line_and_exit_2(capsys):
    assert main(["estimate", "--bytes", "1XB", *CLUSTER]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lmforge: error: --bytes: bad size '1XB'") and "\n" not in err


def test_no_corpus_size_says_which_flags_to_give(capsys):
    assert main(["estimate", *CLUSTER]) == 2
    assert "--docs N and/or --bytes B" in capsys.readouterr().err
