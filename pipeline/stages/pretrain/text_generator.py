"""The code of the logged MLflow model (models-from-code): MLflow copies this file into the
logged model and runs it on `mlflow.pyfunc.load_model`, so no pickled object is ever stored or
loaded; the weights are the pretrain artifact's safetensors, passed as the model's artifacts.

Not imported by lmforge: `mlflow_model.log_text_generator` names this file by path.
Input: a list of prompts or a DataFrame with a `prompt` column; output: one continuation each.
"""

from __future__ import annotations

from pathlib import Path

import mlflow.models
import mlflow.pyfunc


class TextGenerator(mlflow.pyfunc.PythonModel):
    """Greedy or sampled continuations from the lmforge model and tokenizer in the artifacts."""

    def load_context(self, context) -> None:
        from lmforge.pipeline.evaluation.trained_model import TrainedModel

        self.trained = TrainedModel(
            Path(context.artifacts["pretrain"]), Path(context.artifacts["tokenizer"])
        )

    def predict(self, context, model_input, params: dict | None = None) -> list[str]:
        from lmforge.model.generate import SamplingConfig

        params = params or {}
        if hasattr(model_input, "columns"):  # a DataFrame: the `prompt` column, else the first
            column = "prompt" if "prompt" in model_input.columns else model_input.columns[0]
            prompts = list(model_input[column])
        else:
            prompts = list(model_input)
        sampling = SamplingConfig(
            max_new_tokens=int(params.get("max_new_tokens", 32)),
            greedy=bool(params.get("greedy", True)),
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            seed=int(params.get("seed", 0)),
        )
        return self.trained.complete([str(p) for p in prompts], sampling)


mlflow.models.set_model(TextGenerator())
