"""The `FileStore` on a bucket (s3://bucket/prefix, or any filesystem URI pyarrow opens).

Nothing renames in a bucket: a file is one object, visible once its upload completes (pyarrow's
output streams upload large files in parts, in the background while later bytes are written),
and a directory is published by its marker, uploaded after every other file, so `publish` has
nothing to do. Readers that want a file's bytes as they need them go through the node cache
(`node_cache`), which reads ranges with `filesystem`.

The filesystem of each bucket is opened once per process. Credentials come from the environment
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL` for S3-compatible servers),
never from config.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

from lmforge.durable import WholeOrNothing
from lmforge.pipeline.errors import LmforgeError

BUCKET_SCHEMES = ("s3", "gs")
"""Schemes whose paths are `bucket/key`, as pyarrow names them."""
ENDPOINT_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_DEFAULT_REGION")
"""A filesystem opened under other settings of these is opened anew."""
_opened: dict[tuple, object] = {}
_lock = threading.Lock()


def filesystem(uri: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) of a URI; the filesystem is shared per scheme and
    bucket within this process."""
    import pyarrow.fs as pafs

    scheme, _, rest = uri.rstrip("/").partition("://")
    if scheme not in BUCKET_SCHEMES:  # hdfs://...: pyarrow knows their paths
        try:
            return pafs.FileSystem.from_uri(uri)
        except (OSError, ValueError) as exc:
            raise LmforgeError(f"cannot open the store {uri}: {exc}") from exc
    root = f"{scheme}://{rest.split('/', 1)[0]}"
    opened = (root, *(os.environ.get(name) for name in ENDPOINT_ENV))
    with _lock:
        try:
            if opened not in _opened:
                _opened[opened] = pafs.FileSystem.from_uri(root)[0]
        except (OSError, ValueError) as exc:
            raise LmforgeError(f"cannot open the store {uri}: {exc}") from exc
    return _opened[opened], rest


def _missing(exc: OSError) -> bool:
    return (
        isinstance(exc, FileNotFoundError)
        or "NoSuchKey" in str(exc)
        or ("not found" in str(exc).lower())
    )


class BucketObject(WholeOrNothing):
    """An object being uploaded through a pyarrow output stream; it exists once committed."""

    def __init__(self, fs: Any, path: str) -> None:
        self.fs, self.path = fs, path
        self.stream = fs.open_output_stream(path)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self.stream.write(data)
        return len(data)

    def commit(self) -> None:
        self.stream.close()

    def abort(self) -> None:
        try:
            self.stream.close()  # pyarrow cannot abandon an upload: finish it, then delete it
        finally:
            with contextlib.suppress(OSError):  # else: unreferenced, the attempt's garbage
                self.fs.delete_file(self.path)


class BucketFiles:
    """Objects under a URI prefix; relative POSIX paths name them."""

    renames = False
    """A directory is published by its marker, written last."""

    def __init__(self, uri: str) -> None:
        self.root = uri.rstrip("/")
        self.fs, self.base = filesystem(self.root)

    def key(self, rel: str = "") -> str:
        """The path of `rel` inside the filesystem (`bucket/prefix/rel`)."""
        return "/".join(p for p in (self.base, rel) if p)

    def uri(self, rel: str = "") -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def local_path(self, rel: str = "") -> None:
        """Nothing of a bucket is on this node (see `node_cache` for copies)."""
        return None

    def read_bytes(self, rel: str) -> bytes | None:
        try:
            with self.fs.open_input_stream(self.key(rel)) as handle:
                return handle.read()
        except OSError as exc:
            if _missing(exc):
                return None
            raise

    def write_bytes(self, rel: str, data: bytes) -> None:
        """The whole object `rel`, in one upload."""
        with self.fs.open_output_stream(self.key(rel)) as handle:
            handle.write(data)

    def open_write(self, rel: str) -> BucketObject:
        """`rel` to upload, visible once committed (deleted after `abort`)."""
        return BucketObject(self.fs, self.key(rel))

    def open_read(self, rel: str) -> Any:
        return self.fs.open_input_stream(self.key(rel))

    def size(self, rel: str) -> int | None:
        """Bytes of the object `rel`, None when there is no such object."""
        info = self.fs.get_file_info(self.key(rel))
        return info.size if info.is_file else None

    def sizes(self, rel: str = "", *, recursive: bool = False) -> dict[str, int]:
        """Bytes of every object under the prefix `rel` by its path relative to it (one listing;
        {} when there is none)."""
        import pyarrow.fs as pafs

        prefix = self.key(rel)
        selector = pafs.FileSelector(prefix, recursive=recursive, allow_not_found=True)
        listing = self.fs.get_file_info(selector)
        return {i.path[len(prefix) + 1 :]: i.size for i in listing if i.is_file}

    def delete_file(self, rel: str) -> None:
        with contextlib.suppress(OSError):  # FileNotFoundError included
            self.fs.delete_file(self.key(rel))

    def delete_dir(self, rel: str) -> None:
        self.fs.delete_dir(self.key(rel))

    def publish(self, pending: str, final: str, set_aside: str | None = None) -> None:
        """Nothing to rename: the directory's marker, written last, published it."""
