"""Every bench script imports: a module it borrows from moved or renamed (as `eval_scale` once
imported a helper `clean_scale` no longer had) fails here, not when someone next measures."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from bench_modules import BENCH

SCRIPTS = sorted(path.stem for path in BENCH.glob("*.py"))


def test_there_are_bench_scripts_to_import():
    assert {"clean_scale", "eval_scale", "token_scale", "checkpoint_scale"} <= set(SCRIPTS)


def test_every_bench_script_imports():
    # One fresh process for all of them: each sees `bench/` on its path, as when it is run.
    check = textwrap.dedent(
        f"""
        import importlib, sys, traceback
        sys.path.insert(0, {str(BENCH)!r})
        failed = []
        for name in {SCRIPTS!r}:
            try:
                importlib.import_module(name)
            except Exception:
                failed.append(name + ": " + traceback.format_exc().splitlines()[-1])
        print("\\n".join(failed))
        sys.exit(1 if failed else 0)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=300, cwd=BENCH
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
