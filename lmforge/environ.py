"""Environment variables set for a block and put back after it: a Ray worker's process goes on
to run other tasks, which must not inherit one task's settings. Neutral, like `durable`:
`model/`, `tokenizer/` and `pipeline/` may all use it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def environ_set(values: Mapping[str, str]) -> Iterator[None]:
    """Inside, `values` are in `os.environ`; after, each name has the value it had before, or
    none where it had none."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
