"""No lmforge code deserialises with pickle or runs code shipped with a model: no `pickle`,
`cloudpickle` or `dill` load or Unpickler, no `joblib.load`, `pandas.read_pickle` or
`mlflow.*.load_model`, every `torch.load` passes `weights_only=True`, no `numpy.load` with
`allow_pickle=True`, no `trust_remote_code`. Read from the source's AST with its imports resolved
(`tests/unsafe_loads.py`), so a new call site, however it is imported, fails here with its file
and line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from unsafe_loads import unsafe_loads

REPO = Path(__file__).resolve().parents[2]


def _source_dirs() -> list[Path]:
    """Every top-level package folder (what installs as `lmforge.*`), and the benchmarks."""
    packages = {p.parent for p in REPO.glob("*/__init__.py") if p.parent.name != "tests"}
    return sorted(packages | {REPO / "bench"})


UNSAFE = {
    "pickle.load": ["import pickle\npickle.load(f)", "import pickle as p\np.load(f)"],
    "pickle.loads": [
        "import pickle\npickle.loads(b)",
        "from pickle import loads\nloads(b)",
        "from pickle import loads as l\nl(b)",
        "import pickle as p\nundo = p.loads\nundo(b)",
        "import pickle\nlist(map(pickle.loads, blobs))",
    ],
    "pickle.Unpickler": [
        "import pickle\npickle.Unpickler(f).load()",
        "from pickle import Unpickler as U\nU(f).load()",
        "import pickle\nclass Mine(pickle.Unpickler):\n    pass",
    ],
    "_pickle.loads": ["import _pickle\n_pickle.loads(b)"],
    "cloudpickle.load": ["import cloudpickle\ncloudpickle.load(f)"],
    "cloudpickle.loads": ["from cloudpickle import loads\nloads(b)"],
    "dill.loads": ["import dill as d\nd.loads(b)"],
    "dill.Unpickler": ["from dill import Unpickler\nUnpickler(f).load()"],
    "joblib.load": ["import joblib\njoblib.load(p)", "from joblib import load\nload(p)"],
    "pandas.read_pickle": [
        "import pandas as pd\npd.read_pickle(p)",
        "import pandas\npandas.read_pickle(p)",
        "from pandas import read_pickle\nread_pickle(p)",
    ],
    "torch.load": [
        "import torch\ntorch.load(p)",
        "import torch\ntorch.load(p, weights_only=False)",
        "import torch\ntorch.load(p, weights_only=flag)",
        "from torch import load\nload(p)",
        "import torch as t\nt.load(p, map_location='cpu')",
        "import torch\nload = torch.load\nload(p)",
    ],
    "torch.serialization.load": ["from torch.serialization import load\nload(p)"],
    "numpy.load": [
        "import numpy as np\nnp.load(p, allow_pickle=True)",
        "from numpy import load\nload(p, allow_pickle=True)",
    ],
    "mlflow.pyfunc.load_model": [
        "import mlflow\nmlflow.pyfunc.load_model(uri)",
        "import mlflow.pyfunc\nmlflow.pyfunc.load_model(uri)",
        "from mlflow import pyfunc\npyfunc.load_model(uri)",
        "from mlflow.pyfunc import load_model as lm\nlm(uri)",
    ],
    "mlflow.sklearn.load_model": ["import mlflow.sklearn\nmlflow.sklearn.load_model(uri)"],
    "trust_remote_code": [
        "from transformers import AutoModel\nAutoModel.from_pretrained(p, trust_remote_code=True)",
        "import transformers as tf\ntf.AutoModel.from_pretrained(p, trust_remote_code=yes)",
        "pipeline_for(task)(p, trust_remote_code=True)",
    ],
}

SAFE = [
    "import torch\ntorch.load(p, weights_only=True)",
    "from torch import load\nload(p, weights_only=True)",
    "import numpy as np\nnp.load(p)",
    "import numpy as np\nnp.load(p, allow_pickle=False)",
    "from safetensors.torch import load_file\nload_file(p)",
    "import json\njson.loads(s)",
    "import pickle\npickle.dumps(x)",  # writing is not loading
    "from transformers import AutoModel\nAutoModel.from_pretrained(p, trust_remote_code=False)",
    "from mlflow.models import Model\nModel.load(path)",  # reads the MLmodel YAML only
    "from .weights import load\nload(p)",  # our own module, not torch's
    "def load(p):\n    return p\nload(p)",
]

CASES = [(name, source) for name, sources in UNSAFE.items() for source in sources]


@pytest.mark.parametrize(("name", "source"), CASES, ids=[s for _, s in CASES])
def test_each_unsafe_form_is_found_however_it_is_imported(name, source):
    found = unsafe_loads(source, "bad.py")
    assert found and all(name in line for line in found), found


def test_a_finding_names_the_file_line_and_qualified_name():
    source = "import json\nfrom torch import load as read\n\nstate = read(path)\n"
    assert unsafe_loads(source, "model/x.py") == [
        "model/x.py:4: torch.load (without weights_only=True)"
    ]


@pytest.mark.parametrize("source", SAFE)
def test_safe_loads_are_not_reported(source):
    assert unsafe_loads(source, "good.py") == []


def test_the_scan_covers_every_lmforge_package_folder():
    folders = {d.name for d in _source_dirs()}
    assert {"pipeline", "model", "tokenizer", "bench", "lmforge"} <= folders


def test_no_lmforge_code_loads_with_pickle_or_runs_code_from_a_model():
    found = []
    for folder in _source_dirs():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            found += unsafe_loads(path.read_text(encoding="utf-8"), rel)
    assert found == [], (
        "unsafe deserialisation (use safetensors, weights_only=True, a model logged from code):\n"
        + "\n".join(found)
    )
