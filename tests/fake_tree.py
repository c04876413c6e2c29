"""A small source tree of the same layout as the repository's (setup.py's ROOTS, the pipeline's
concerns, a stage, bench/), written in code, that keeps every import contract and layout limit:
tests plant one violation in it and see the check fail."""

from __future__ import annotations

import textwrap
from pathlib import Path

ROOTS = {
    "lmforge": "lmforge",
    "lmforge.pipeline": "pipeline",
    "lmforge.model": "model",
    "lmforge.tokenizer": "tokenizer",
    "lmforge.conf": "conf",
}

FILES = {
    "lmforge/__init__.py": '"""The package."""\n',
    "pipeline/__init__.py": "",
    "pipeline/errors.py": "class LmforgeError(Exception):\n    pass\n",
    "pipeline/engine/__init__.py": "",
    "pipeline/engine/stage.py": "from lmforge.pipeline.errors import LmforgeError\n",
    "pipeline/storage/__init__.py": "",
    "pipeline/storage/store.py": "from lmforge.pipeline.errors import LmforgeError\n",
    "pipeline/filters/__init__.py": "",
    "pipeline/filters/base.py": "import numpy\n",
    "pipeline/filters/chain.py": "from lmforge.pipeline.filters import base\n",
    "pipeline/training/__init__.py": "",
    "pipeline/training/worker.py": "import lmforge.model.gpt\n",
    "pipeline/evaluation/__init__.py": "",
    "pipeline/evaluation/progress.py": "from lmforge.pipeline.engine.stage import LmforgeError\n",
    "pipeline/stages/__init__.py": "from lmforge.pipeline.stages.clean import stage\n",
    "pipeline/stages/clean/__init__.py": "",
    "pipeline/stages/clean/stage.py": (
        "from lmforge.pipeline.engine import stage\nfrom lmforge.pipeline.filters import chain\n"
    ),
    "model/__init__.py": "",
    "model/gpt.py": "import math\n",
    "tokenizer/__init__.py": "",
    "tokenizer/bpe.py": "from lmforge.model import gpt\n",
    "conf/__init__.py": "",
    "conf/data/default.yaml": "paths: []\n",
    "bench/estimate_cases.py": "import lmforge.pipeline.engine.stage\n",
    "tests/test_fake.py": "import pytest\n",
}


def write_tree(
    root: Path, planted: dict[str, str] | None = None, roots: dict | None = None
) -> Path:
    """The fake tree under `root`, each of `planted` ({path: text}) appended to its file (or
    written as a new one); returns `root`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "setup.py").write_text(f"ROOTS = {roots or ROOTS!r}\n", encoding="utf-8")
    files = dict(FILES)
    for path, text in (planted or {}).items():
        files[path] = files.get(path, "") + textwrap.dedent(text)
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def line_of(root: Path, path: str, text: str) -> int:
    """The line of `path` (under `root`) that holds `text`."""
    lines = (root / path).read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)
