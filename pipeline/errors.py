"""Errors the CLI turns into one line and a non-zero exit code."""


class LmforgeError(Exception):
    """A failure whose cause is known; the message says what happened and what to do."""

    exit_code = 1


class ConfigError(LmforgeError, ValueError):
    """A bad config key or value, raised before any stage starts."""

    exit_code = 2


class StageFailed(LmforgeError):
    """A stage raised; its descendants did not run."""


class ArtifactError(LmforgeError):
    """A missing, half-written or corrupt artifact."""
