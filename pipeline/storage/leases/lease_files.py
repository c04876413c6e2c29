"""Lease records with compare-and-swap: the one primitive leases are built on.

A lease record is a small JSON document under a name such as `clean/.<key>.lease.json`. Every
change is conditional on what the changer last read (its *token*), so two processes can never
both believe they changed it from the same state:

- `create`: only if no record has that name;
- `replace` and `delete`: only if the record is still the one the token names.

On a local or shared path (`LocalLeaseFiles`) a record is a file: created by a hard link (which
fails rather than replaces), changed in place under an exclusive `flock` held for the few
microseconds of the read-compare-write, its token a digest of its bytes. In a bucket
(`BucketLeaseFiles`, S3 and S3-compatible servers) a record is an object, created with
`If-None-Match: *` and replaced or deleted with `If-Match: <ETag>`; a bucket that ignores these
conditions is refused at once (`check_conditional_writes`), as two runs could then both win.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from lmforge.durable import create_exclusive, fsync_dir
from lmforge.pipeline.errors import LmforgeError
from lmforge.pipeline.storage.location import is_bucket, local_path


class LeaseFiles(Protocol):
    """Lease records under one root, each change conditional on a token."""

    root: str

    def create(self, name: str, data: bytes) -> str | None:
        """The new record's token, or None when a record of that name exists."""
        ...

    def read(self, name: str) -> tuple[bytes, str] | None:
        """(content, token) of the record, or None when there is none."""
        ...

    def replace(self, name: str, data: bytes, token: str) -> str | None:
        """The new token, or None when the record is gone or no longer the one `token` names."""
        ...

    def delete(self, name: str, token: str) -> bool:
        """Whether the record `token` names was deleted (False: gone or changed meanwhile)."""
        ...

    def names(self, suffix: str) -> list[str]:
        """Every record name ending in `suffix`."""
        ...


def open_lease_files(location: str) -> LeaseFiles:
    """The lease records of a store: beside its artifacts, on its path or in its bucket."""
    if not is_bucket(location):
        return LocalLeaseFiles(local_path(location))
    files = BucketLeaseFiles(location)
    files.check_conditional_writes()
    return files


def _token(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


class LocalLeaseFiles:
    """Lease records as files under a directory (local, or shared by every node through NFS or
    another file system with working `flock`)."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root)
        self.root = str(self.path)

    def create(self, name: str, data: bytes) -> str | None:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return _token(data) if create_exclusive(path, data) else None

    def read(self, name: str) -> tuple[bytes, str] | None:
        with self._locked(name, fcntl.LOCK_SH) as fd:
            if fd is None:
                return None
            data = _read_all(fd)
            return data, _token(data)

    def replace(self, name: str, data: bytes, token: str) -> str | None:
        with self._locked(name, fcntl.LOCK_EX) as fd:
            if fd is None or _token(_read_all(fd)) != token:
                return None
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
            return _token(data)

    def delete(self, name: str, token: str) -> bool:
        path = self.path / name
        with self._locked(name, fcntl.LOCK_EX) as fd:
            if fd is None or _token(_read_all(fd)) != token:
                return False
            path.unlink()
            fsync_dir(path.parent)
            return True

    def names(self, suffix: str) -> list[str]:
        if not self.path.is_dir():
            return []
        return sorted(
            p.relative_to(self.path).as_posix()
            for p in self.path.rglob(f"*{suffix}")
            if p.is_file()
        )

    @contextlib.contextmanager
    def _locked(self, name: str, mode: int) -> Iterator[int | None]:
        """The record's file descriptor under `flock(mode)`, or None when there is no record.
        A record deleted or recreated while we waited for the lock is opened again."""
        path = self.path / name
        while True:
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                yield None
                return
            try:
                fcntl.flock(fd, mode)
                try:
                    current = os.stat(path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    current = False
                if current:
                    yield fd
                    return
            finally:
                os.close(fd)  # releases the lock


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0)


class BucketLeaseFiles:
    """Lease records as objects under `s3://bucket/prefix`, changed with S3's conditional
    writes (credentials and endpoint from the environment, as for the store)."""

    def __init__(self, uri: str) -> None:
        scheme, _, rest = uri.rstrip("/").partition("://")
        if scheme != "s3":
            raise LmforgeError(
                f"runs sharing the store {uri} need leases, which need conditional writes; "
                "lmforge does them on S3 and S3-compatible stores (s3://): use one"
            )
        self.root = uri.rstrip("/")
        self.bucket, _, self.prefix = rest.partition("/")
        import boto3

        self.client = boto3.client("s3")

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def create(self, name: str, data: bytes) -> str | None:
        try:
            done = self.client.put_object(
                Bucket=self.bucket, Key=self._key(name), Body=data, IfNoneMatch="*"
            )
        except Exception as exc:
            if _refused(exc):
                return None
            raise self._unreachable(exc) from exc
        return done["ETag"]

    def read(self, name: str) -> tuple[bytes, str] | None:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self._key(name))
        except Exception as exc:
            if _missing(exc):
                return None
            raise self._unreachable(exc) from exc
        return got["Body"].read(), got["ETag"]

    def replace(self, name: str, data: bytes, token: str) -> str | None:
        try:
            done = self.client.put_object(
                Bucket=self.bucket, Key=self._key(name), Body=data, IfMatch=token
            )
        except Exception as exc:
            if _refused(exc) or _missing(exc):
                return None
            raise self._unreachable(exc) from exc
        return done["ETag"]

    def delete(self, name: str, token: str) -> bool:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(name), IfMatch=token)
        except Exception as exc:
            if _refused(exc) or _missing(exc):
                return False
            raise self._unreachable(exc) from exc
        return True

    def names(self, suffix: str) -> list[str]:
        found: list[str] = []
        start = f"{self.prefix}/" if self.prefix else ""
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=start):
            for item in page.get("Contents", []):
                if item["Key"].endswith(suffix):
                    found.append(item["Key"][len(start) :])
        return sorted(found)

    def check_conditional_writes(self) -> None:
        """Refuse a bucket that does not honour `If-None-Match` and `If-Match`, in one line."""
        probe = f".lease-probe-{uuid.uuid4().hex[:12]}"
        refusal = ""
        try:
            first = self.create(probe, b"{}")
            second = self.create(probe, b"{}") if first else None
            stale = self.replace(probe, b"[]", '"0000"') if first else None
            honoured = first is not None and second is None and stale is None
        except LmforgeError as exc:  # a server that rejects the conditional headers themselves
            honoured, refusal = False, f" ({exc})"
        finally:
            with contextlib.suppress(Exception):
                self.client.delete_object(Bucket=self.bucket, Key=self._key(probe))
        if not honoured:
            raise LmforgeError(
                f"the bucket of {self.root} does not honour conditional writes (If-None-Match, "
                f"If-Match){refusal}, which runs sharing a store need to claim its stages; use "
                "a store that does (AWS S3, MinIO, Ceph RGW) or give each run a store of its own"
            )

    def _unreachable(self, exc: Exception) -> LmforgeError:
        return LmforgeError(f"cannot reach the leases of {self.root}: {_reason(exc)}")


def _code(exc: Exception) -> str:
    response: Any = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _status(exc: Exception) -> int:
    response: Any = getattr(exc, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _refused(exc: Exception) -> bool:
    """A condition that did not hold (412), or a concurrent conditional write (409)."""
    return _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict") or _status(exc) in (
        409,
        412,
    )


def _missing(exc: Exception) -> bool:
    return _code(exc) in ("NoSuchKey", "404") or _status(exc) == 404


def _reason(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
