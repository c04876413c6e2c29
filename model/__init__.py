"""The decoder-only transformer: config, model, generation, weights and HF export.

from lmforge.model import GPT, ModelConfig, SamplingConfig
    from lmforge.model.generate import generate

The names load on first use (PEP 562), so `lmforge.model.config` and `lmforge.model.flops`
import without torch (`lmforge estimate` answers at once). `generate` is not among them: it is
also the name of a submodule, and importing that submodule (as `lmforge.model.gpt`'s users do)
makes `lmforge.model.generate` the module, so the package could not give the function reliably.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lmforge.model.config import MODEL_PRESETS, ModelConfig
    from lmforge.model.generate import SamplingConfig
    from lmforge.model.gpt import GPT

_HOMES = {
    "GPT": "lmforge.model.gpt",
    "MODEL_PRESETS": "lmforge.model.config",
    "ModelConfig": "lmforge.model.config",
    "SamplingConfig": "lmforge.model.generate",
}

__all__ = ["GPT", "MODEL_PRESETS", "ModelConfig", "SamplingConfig"]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'lmforge.model' has no attribute {name!r}")
