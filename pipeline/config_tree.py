"""Hydra/OmegaConf at the CLI edge: compose `conf/` with `key=value` overrides into a plain dict.

Inner code never sees the config tree: each stage receives only the sections it declares, already
turned into typed dataclasses by the stage's own parser.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmforge.pipeline.errors import ConfigError


def config_dir() -> Path:
    """The shipped `conf/` directory (installed as the package `lmforge.conf`)."""
    return Path(str(importlib.resources.files("lmforge.conf")))


def compose(overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Compose the root config with overrides; unknown keys fail here, naming the key."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"bad override {item!r}: write key=value, e.g. train.lr=3e-4")
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            cfg = hydra_compose(config_name="config", overrides=list(overrides))
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_one_line(exc)) from exc
    assert isinstance(resolved, dict)
    return resolved


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    # Hydra's "Could not override 'train.lrr'. ... Key 'lrr' is not in struct" -> keep the cause.
    if "not in struct" in text or "Could not override" in text:
        key = text.split("'")[1] if "'" in text else text
        return f"unknown config key {key!r}: check the spelling (see `conf/` for valid keys)"
    return f"bad config: {text.split(' Config search path')[0]}"


def section(config: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted path such as `eval.perplexity`."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"config has no section {dotted!r}")
        node = node[part]
    return node
