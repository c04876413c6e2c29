"""Which heavy modules importing one module loads, asked of a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys


def loaded_by_import(module: str, names: list[str]) -> dict[str, bool]:
    """{name: whether `import module` in a new process left `name` in sys.modules}."""
    code = (
        "import json, sys\n"
        f"import {module}\n"
        f"print(json.dumps({{n: n in sys.modules for n in {names!r}}}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
