"""Importing a script of `bench/` in tests, once per process.

The bench scripts are not a package. A module loaded twice under one name leaves the first
copy's functions unpicklable by name, and `multiprocessing` pickles functions by name, so every
test shares the one copy kept in `sys.modules`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_bench(name: str) -> ModuleType:
    """`bench/<name>.py` as the module `name`, loaded on first use."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
