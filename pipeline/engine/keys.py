"""Cache keys: hash of (stage name, version, canonical config it reads, its inputs' keys).

A config key added after a store was written must not invalidate it: a stage declares each key
it gained later with the value that keeps its earlier behaviour (`StageSpec.unkeyed`), and at
that value the key is left out of the hash (`without_unkeyed`), so every existing key stays the
same. A new default that changes what a stage writes bumps the stage's `version` instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def canonical_json(value: Any) -> str:
    """Key-sorted compact JSON, the one form that is hashed and stored."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def cache_key(
    stage: str, version: str, config: Mapping[str, Any], input_keys: Mapping[str, str]
) -> str:
    """16 hex digits of sha256 over the stage's identity, config and upstream keys."""
    payload = canonical_json(
        {"stage": stage, "version": version, "config": config, "inputs": dict(input_keys)}
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def without_unkeyed(sections: Mapping[str, Any], unkeyed: Mapping[str, Any]) -> dict[str, Any]:
    """`sections` ({dotted section path: value}) without the keys of `unkeyed` ({dotted key:
    neutral value}) that are at their neutral value; the rest is left as it is (copied)."""
    kept = {path: _copy(value) for path, value in sections.items()}
    for dotted, neutral in unkeyed.items():
        for path in list(kept):
            if dotted == path:
                if kept[path] == neutral:
                    del kept[path]
            elif dotted.startswith(path + "."):
                _drop_at(kept[path], dotted[len(path) + 1 :].split("."), neutral)
    return kept


def _drop_at(node: Any, parts: list[str], neutral: Any) -> None:
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict) and parts[-1] in node and node[parts[-1]] == neutral:
        del node[parts[-1]]


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    return value
