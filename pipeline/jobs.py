"""Cluster subcommands (`submit`, `jobs`, `logs`, `stop`); see `lmforge.pipeline.cli`."""

from __future__ import annotations


def register(sub, with_overrides) -> None:
    """Add this module's subcommands to the `lmforge` parser."""
