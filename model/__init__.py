"""The decoder-only transformer: config, model, generation, weights and HF export.

from lmforge.model import GPT, ModelConfig, SamplingConfig, generate
"""

from lmforge.model.config import MODEL_PRESETS, ModelConfig
from lmforge.model.generate import SamplingConfig, generate
from lmforge.model.gpt import GPT

__all__ = ["GPT", "MODEL_PRESETS", "ModelConfig", "SamplingConfig", "generate"]
