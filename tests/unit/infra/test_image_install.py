"""What the image's Dockerfile copies builds a wheel that holds every module and config file, and
the installed (not editable) package imports and composes its config: the image build's
`pip install /home/ray/lmforge && lmforge dag`, without a Docker engine. A new folder of modules,
named in no list, is installed too: packages are found by discovery."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "infra" / "docker" / "Dockerfile"
DEST = "/home/ray/lmforge/"
PACKAGES = {"lmforge": "lmforge", "pipeline": "lmforge/pipeline", "model": "lmforge/model"}
PACKAGES |= {"tokenizer": "lmforge/tokenizer", "conf": "lmforge/conf"}


def _build_context(context: Path) -> None:
    """Copy exactly what the Dockerfile's COPY lines copy into `context`."""
    for line in re.findall(r"^COPY --chown=\S+ (.+)$", DOCKERFILE.read_text(), re.M):
        *sources, dest = line.split()
        assert dest.startswith(DEST), line
        below = dest[len(DEST) :]
        for source in sources:
            target = context / (below if below and len(sources) == 1 else source)
            if (REPO / source).is_dir():
                shutil.copytree(
                    REPO / source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(REPO / source, target)


PLANTED = {
    "pipeline/planted_concern/__init__.py": "",
    "pipeline/planted_concern/deeper/__init__.py": "",
    "pipeline/planted_concern/deeper/planted.py": "PLANTED = True\n",
}
"""A new folder, two deep, that no list names: `find_packages` (setup.py) installs it."""


def _plant_new_folder(context: Path) -> None:
    for path, text in PLANTED.items():
        (context / path).parent.mkdir(parents=True, exist_ok=True)
        (context / path).write_text(text)


def _expected_files(source: Path) -> set[str]:
    """Every module and config file of the packages under `source`, as named inside the wheel."""
    expected = set()
    for folder, package in PACKAGES.items():
        for path in (source / folder).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix in {".py", ".yaml", ".json", ".txt", ".jsonl"}:
                expected.add(f"{package}/{path.relative_to(source / folder).as_posix()}")
    return expected


@pytest.mark.slow  # builds the wheel and imports every module in a fresh process
def test_the_image_installs_every_module_and_config_file(tmp_path):
    context, dist, site = tmp_path / "context", tmp_path / "dist", tmp_path / "site"
    _build_context(context)
    _plant_new_folder(context)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(dist), str(context)],
        check=True,
        timeout=300,
    )
    [wheel] = dist.glob("lmforge-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(site)
    expected = _expected_files(context)
    assert expected >= _expected_files(REPO)
    assert "lmforge/pipeline/planted_concern/deeper/planted.py" in expected
    missing = sorted(expected - names)
    assert not missing, f"a non-editable install (the image) lacks {missing}"

    check = textwrap.dedent(
        f"""
        import importlib, pkgutil, runpy, sys
        sys.path.insert(0, {str(site)!r})
        import lmforge
        assert lmforge.__file__.startswith({str(site)!r}), lmforge.__file__
        for info in pkgutil.walk_packages(lmforge.__path__, "lmforge."):
            if info.name.endswith(".__main__"):  # `python -m`'s entry: importing it runs it
                continue
            importlib.import_module(info.name)
        from lmforge.pipeline.planted_concern.deeper.planted import PLANTED
        assert PLANTED
        sys.argv = ["lmforge", "dag"]
        runpy.run_module("lmforge.pipeline.cli", run_name="__main__")  # exits with its code
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "pretrain" in proc.stdout
