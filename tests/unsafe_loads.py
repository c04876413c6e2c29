"""Find deserialising calls that could run code from a file, by reading a module's AST.

Names are resolved through the module's imports (`import pickle as p`, `from torch import load`,
`from pickle import loads as l`) and plain assignments (`load = torch.load`), so `p.loads(b)`
reads as `pickle.loads`. Some names are unsafe wherever they are referenced (called, passed as a
callback, subclassed); others only when called without the argument that makes them safe.
"""

from __future__ import annotations

import ast

ALWAYS_UNSAFE = {
    "pickle.load": "unpickles",
    "pickle.loads": "unpickles",
    "pickle.Unpickler": "unpickles",
    "pickle._Unpickler": "unpickles",
    "_pickle.load": "unpickles",
    "_pickle.loads": "unpickles",
    "_pickle.Unpickler": "unpickles",
    "cloudpickle.load": "unpickles",
    "cloudpickle.loads": "unpickles",
    "cloudpickle.Unpickler": "unpickles",
    "dill.load": "unpickles",
    "dill.loads": "unpickles",
    "dill.Unpickler": "unpickles",
    "shelve.open": "unpickles",
    "joblib.load": "unpickles",
    "pandas.read_pickle": "unpickles",
    "mlflow.pyfunc.load_model": "may unpickle a model object and runs the model's code",
    "mlflow.pyfunc.load_pyfunc": "may unpickle a model object and runs the model's code",
}
"""Qualified name -> why it may run code from the file it reads."""

SAFE_ONLY_WITH = {
    "torch.load": ("weights_only", True),
    "torch.serialization.load": ("weights_only", True),
    "numpy.load": ("allow_pickle", False),
}
"""Qualified name -> the keyword and constant without which the call may unpickle.
numpy.load refuses pickles by default, so only an `allow_pickle` other than False is unsafe."""

DEFAULT_IS_SAFE = {"numpy.load"}
"""Of SAFE_ONLY_WITH, those that are safe when the keyword is not passed at all."""

MLFLOW_FLAVOR_LOAD = "may unpickle the model (sklearn, pytorch and other flavours pickle it)"


def _always_unsafe(name: str) -> str | None:
    if name.startswith("mlflow.") and name.endswith(".load_model"):
        return ALWAYS_UNSAFE.get(name, MLFLOW_FLAVOR_LOAD)
    return ALWAYS_UNSAFE.get(name)


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> qualified name, from imports and `name = dotted.name` assignments."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:  # `import a.b` binds `a`
                    aliases[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            # a relative import keeps its dots: it never names a library
            module = "." * node.level + (f"{node.module}." if node.module else "")
            for a in node.names:
                aliases[a.asname or a.name] = f"{module}{a.name}"
    for node in ast.walk(tree):  # after every import, so `load = p.load` resolves through `p`
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], _dotted(node.value)
            if isinstance(target, ast.Name) and value:
                aliases[target.id] = _resolve(value, aliases)
    return aliases


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of attributes on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _resolve(dotted: str, aliases: dict[str, str]) -> str:
    head, _, rest = dotted.partition(".")
    full = aliases.get(head, head)
    return f"{full}.{rest}" if rest else full


def _keyword_is(node: ast.Call, name: str, value: object) -> bool | None:
    """True/False whether keyword `name` is the constant `value`; None if not passed."""
    for k in node.keywords:
        if k.arg == name:
            return isinstance(k.value, ast.Constant) and k.value.value is value
    return None


def _unsafe_call(node: ast.Call, name: str) -> str | None:
    if name in SAFE_ONLY_WITH:
        keyword, safe_value = SAFE_ONLY_WITH[name]
        is_safe = _keyword_is(node, keyword, safe_value)
        if is_safe is None:
            is_safe = name in DEFAULT_IS_SAFE
        if not is_safe:
            return f"without {keyword}={safe_value}"
    if _keyword_is(node, "trust_remote_code", False) is False:
        return "trust_remote_code other than False runs code from the model repository"
    return None


def unsafe_loads(source: str, filename: str) -> list[str]:
    """`file:line: qualified.name (why)` for every use that could run code from a file."""
    tree = ast.parse(source, filename)
    aliases = _aliases(tree)
    found = set()
    for node in ast.walk(tree):
        dotted = _dotted(node.func if isinstance(node, ast.Call) else node)
        name = _resolve(dotted, aliases) if dotted else "a call"
        # a call, checked with its arguments; or a reference: called, passed, subclassed
        why = _unsafe_call(node, name) if isinstance(node, ast.Call) else _always_unsafe(name)
        if why:
            found.add((node.lineno, f"{filename}:{node.lineno}: {name} ({why})"))
    return [line for _, line in sorted(found)]
