"""The decoder-only transformer: config, model, generation, weights and HF export.

from lmforge.model import GPT, ModelConfig, SamplingConfig, generate

The names load on first use (PEP 562), so `lmforge.model.config` and `lmforge.model.flops`
import without torch (`lmforge estimate` answers at once).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lmforge.model.config import MODEL_PRESETS, ModelConfig
    from lmforge.model.generate import SamplingConfig, generate
    from lmforge.model.gpt import GPT

_HOMES = {
    "GPT": "lmforge.model.gpt",
    "MODEL_PRESETS": "lmforge.model.config",
    "ModelConfig": "lmforge.model.config",
    "SamplingConfig": "lmforge.model.generate",
    "generate": "lmforge.model.generate",
}

__all__ = ["GPT", "MODEL_PRESETS", "ModelConfig", "SamplingConfig", "generate"]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'lmforge.model' has no attribute {name!r}")
