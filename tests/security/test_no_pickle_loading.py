"""No lmforge code deserialises with pickle: every `torch.load` passes `weights_only=True`, and
nothing calls `pickle.load(s)`, `joblib.load`, `np.load(..., allow_pickle=True)` or asks
transformers to `trust_remote_code`. Read from the source with `ast`, so a new call site that
breaks the rule fails here with its file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("pipeline", "model", "tokenizer", "bench")


def _call_name(node: ast.Call) -> str:
    parts: list[str] = []
    func = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _keyword_is(node: ast.Call, name: str, value: object) -> bool:
    return any(
        k.arg == name and isinstance(k.value, ast.Constant) and k.value.value == value
        for k in node.keywords
    )


def unsafe_loads(source: str, filename: str) -> list[str]:
    """`file:line: call` for every deserialising call that could run code from a file."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        leaf = name.rsplit(".", 1)[-1]
        unsafe = (
            (name.endswith("torch.load") and not _keyword_is(node, "weights_only", True))
            or name in ("pickle.load", "pickle.loads", "cloudpickle.load", "joblib.load")
            or (
                leaf == "load" and name.startswith("np") and _keyword_is(node, "allow_pickle", True)
            )
            or _keyword_is(node, "trust_remote_code", True)
        )
        if unsafe:
            found.append(f"{filename}:{node.lineno}: {name}")
    return found


def test_the_rule_catches_each_unsafe_form():
    bad = (
        "torch.load(p)\n"
        "torch.load(p, weights_only=False)\n"
        "pickle.loads(b)\n"
        "np.load(p, allow_pickle=True)\n"
        "AutoModel.from_pretrained(p, trust_remote_code=True)\n"
    )
    good = "torch.load(p, weights_only=True)\nnp.load(p, allow_pickle=False)\nload_file(p)\n"
    assert len(unsafe_loads(bad, "bad.py")) == 5
    assert unsafe_loads(good, "good.py") == []


def test_no_lmforge_code_loads_with_pickle():
    found = []
    for folder in SOURCE_DIRS:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            found += unsafe_loads(path.read_text(encoding="utf-8"), rel)
    assert found == [], (
        "unsafe deserialisation (use safetensors / weights_only=True):\n" + "\n".join(found)
    )
