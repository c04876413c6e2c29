"""Cache keys: hash of (stage name, version, canonical config it reads, its inputs' keys)."""

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
