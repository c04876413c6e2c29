"""Where stored data lives: a local path or a bucket, decided by one rule.

A location with a scheme (`s3://bucket/prefix`, `gs://...`, `hdfs://...`) is a bucket, reached
through pyarrow, where nothing renames; anything else is a local path (on shared storage when
several nodes use it), and so is a `file://` URI, which names a local path the way a plain one
does. Artifacts, checkpoints, a stage's shared work directory and Ray Train's storage all ask
`is_bucket`, so a location means the same thing to each of them.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_SCHEME = "file://"


def is_bucket(location: str | os.PathLike[str] | None) -> bool:
    """Whether `location` names a bucket (s3://...) rather than a local path (`file://` is
    local)."""
    if location is None:
        return False
    text = os.fspath(location)
    return "://" in text and not text.startswith(FILE_SCHEME)


def local_path(location: str | os.PathLike[str]) -> Path:
    """The local path a location names: `file:///data/store` is `/data/store`, `~` expanded."""
    text = os.fspath(location)
    if is_bucket(text):
        raise ValueError(f"{text} is a bucket, not a local path")
    return Path(text.removeprefix(FILE_SCHEME)).expanduser()


def join(location: str | os.PathLike[str], *parts: str) -> str:
    """`parts` under `location`, as a URI for a bucket and as a path otherwise."""
    if is_bucket(location):
        return "/".join([os.fspath(location).rstrip("/"), *parts])
    return str(local_path(location).joinpath(*parts))


def shared_location(workdir: str | os.PathLike[str], store_uri: str | None, *parts: str) -> str:
    """A path or URI for data kept outside artifacts (checkpoints, Ray Train's storage) that
    every node reaches: under the bucket when the store is one, else under the workdir."""
    if store_uri is not None and is_bucket(store_uri):
        return join(store_uri, *parts)
    return str(Path(workdir).joinpath(*parts))
