"""The logged MLflow model is code and safetensors: it loads and predicts in a process where
unpickling anything fails, so loading it can never run a pickle from the artifact store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from logged_model import PROMPTS, log_tiny_model

from lmforge.model.generate import SamplingConfig
from lmforge.pipeline.evaluation.trained_model import TrainedModel

NO_PICKLE = """
import pickle, sys

refused = []


def refuse_unpickling(event, args):
    if event == "pickle.find_class":  # every unpickled class or function passes here
        refused.append(repr(args))
        raise RuntimeError(f"unpickling is forbidden here: {args}")


def forbidden(*args, **kwargs):
    raise RuntimeError("unpickling is forbidden here")


class ForbiddenUnpickler(pickle.Unpickler):
    __init__ = forbidden


sys.addaudithook(refuse_unpickling)
pickle.load = pickle.loads = forbidden
pickle.Unpickler = ForbiddenUnpickler
"""

LOAD_AND_PREDICT = """
import json
import mlflow

model = mlflow.pyfunc.load_model(sys.argv[1])
print(json.dumps(model.predict(json.loads(sys.argv[2]), params={"max_new_tokens": 6})))
assert not refused, refused  # nothing swallowed a refusal on the way
"""

PAYLOAD = """
import pathlib, _pickle

class Payload:
    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(sys.argv[1]),))

data = _pickle.dumps(Payload())
try:
    _pickle.loads(data)  # the C unpickler, which `pickle.loads = forbidden` does not reach
finally:
    print(json.dumps(refused))
"""


def _guarded(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_PICKLE + script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_the_guard_refuses_a_pickle_before_its_payload_runs(tmp_path):
    witness = tmp_path / "pwned"
    proc = _guarded("import json\n" + PAYLOAD, str(witness))
    assert proc.returncode != 0 and "unpickling is forbidden" in proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])
    assert not witness.exists()


def test_the_logged_model_loads_and_predicts_with_pickle_forbidden(tmp_path):
    uri, _, model_uri, pretrain, tokenizer = log_tiny_model(tmp_path)
    proc = _guarded(
        LOAD_AND_PREDICT,
        model_uri,
        json.dumps(PROMPTS),
        env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads(proc.stdout.splitlines()[-1])
    direct = TrainedModel(pretrain, tokenizer).complete(
        PROMPTS, SamplingConfig(max_new_tokens=6, greedy=True)
    )
    assert served == direct and all(served)
