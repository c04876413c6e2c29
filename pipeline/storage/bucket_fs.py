"""Opening the pyarrow filesystem of a store URI (s3://bucket/prefix), once per process.

Credentials come from the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_ENDPOINT_URL` for S3-compatible servers), never from config.
"""

from __future__ import annotations

import os
import threading

from lmforge.pipeline.errors import LmforgeError

BUCKET_SCHEMES = ("s3", "gs")
"""Schemes whose paths are `bucket/key`, as pyarrow names them."""
ENDPOINT_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_DEFAULT_REGION")
"""A filesystem opened under other settings of these is opened anew."""
_opened: dict[tuple, object] = {}
_lock = threading.Lock()


def filesystem(uri: str):
    """(pyarrow filesystem, path inside it) of a URI; the filesystem is shared per scheme and
    bucket within this process."""
    import pyarrow.fs as pafs

    scheme, _, rest = uri.rstrip("/").partition("://")
    if scheme not in BUCKET_SCHEMES:  # file://, hdfs://...: pyarrow knows their paths
        try:
            return pafs.FileSystem.from_uri(uri)
        except (OSError, ValueError) as exc:
            raise LmforgeError(f"cannot open the artifact store {uri}: {exc}") from exc
    root = f"{scheme}://{rest.split('/', 1)[0]}"
    opened = (root, *(os.environ.get(name) for name in ENDPOINT_ENV))
    with _lock:
        try:
            if opened not in _opened:
                _opened[opened] = pafs.FileSystem.from_uri(root)[0]
        except (OSError, ValueError) as exc:
            raise LmforgeError(f"cannot open the artifact store {uri}: {exc}") from exc
    return _opened[opened], rest
