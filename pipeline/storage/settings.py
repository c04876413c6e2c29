"""How artifacts are written and read: the manifest's block size and the node-local cache
(`cluster.store_block_mb`, `cluster.cache.*`; machine settings, part of no cache key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.storage.node_cache import CacheConfig

DEFAULT_CACHE_GB = 100.0


@dataclass(frozen=True, slots=True)
class StoreSettings:
    block_bytes: int
    """Block size of the per-block checksums recorded for new artifacts."""
    cache: CacheConfig
    """Where each node caches what it reads from a bucket store, and how much at most."""

    @classmethod
    def defaults(cls, workdir: Path) -> StoreSettings:
        return cls.from_cluster({}, workdir)

    @classmethod
    def from_cluster(cls, cluster: dict[str, Any], workdir: Path) -> StoreSettings:
        """From the `cluster` config section; a bad value fails naming its key."""
        block_mb = _positive(cluster.get("store_block_mb"), "cluster.store_block_mb", 4.0)
        cache = cluster.get("cache") or {}
        max_gb = _positive(cache.get("max_gb"), "cluster.cache.max_gb", DEFAULT_CACHE_GB)
        where = cache.get("dir")
        directory = Path(where).expanduser() if where else Path(workdir) / "cache"
        return cls(
            block_bytes=max(1, int(block_mb * 2**20)),
            cache=CacheConfig(str(directory.resolve()), int(max_gb * 2**30)),
        )


def _positive(value: Any, key: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{key} must be a positive number, got {value!r}")
    return float(value)
