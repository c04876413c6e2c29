"""What a sweep refuses before anything starts: no variant, or a swept key no stage reads."""

from __future__ import annotations

from collections.abc import Sequence

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.sweep.grid import SweptKey, Variant, unread_keys

CONFIG_GROUPS = ("preset",)
"""Swept keys that choose a config group: they change what the stages read."""


def check_swept_keys(variants: Sequence[Variant]) -> None:
    """Raise ConfigError when there is no variant, or a swept key is one that no stage reads
    (its variants would be one pipeline run under other names)."""
    from lmforge.pipeline.engine.execute import load_stages

    if not variants:
        raise ConfigError("the sweep has no variant: give at least one key with values, as key=a,b")
    swept = [SweptKey(key, ()) for key in variants[0].params if key not in CONFIG_GROUPS]
    sections = [
        path for spec in load_stages().values() for path in (*spec.config_sections, *spec.sizing)
    ]
    unread = unread_keys(swept, sections)
    if unread:
        raise ConfigError(
            f"no stage reads {', '.join(unread)}: its variants would be the same run; sweep a key "
            "a stage reads (`lmforge dag` lists what each stage reads)"
        )
