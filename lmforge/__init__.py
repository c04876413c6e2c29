"""lmforge: raw text to an evaluated language model (see README.md)."""

import os as _os

# MLflow sends usage data to its vendor's servers from every process that imports it (and first
# downloads a config for that from config.mlflow-telemetry.io); an lmforge process reaches
# nothing at run time but the services the user points it at. Set here, before any of our
# modules imports mlflow (DeepSpeed's import does too). A value the user set wins.
_os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

__version__ = "0.2.0"
