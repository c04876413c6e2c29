"""Shared fixtures of the training unit tests."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist


@pytest.fixture(scope="module")
def world_of_one():
    """torch.distributed as a world of one in this process (gloo), for DeepSpeed engines."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
    }
    saved = {k: os.environ.get(k) for k in env}
    linear = torch.nn.functional.linear  # a ZeRO-3 engine replaces it for the whole process
    os.environ.update(env)
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    _forget_deepspeed_groups()
    torch.nn.functional.linear = linear  # or every later test's Linear runs DeepSpeed's wrapper
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _forget_deepspeed_groups() -> None:
    """DeepSpeed caches the process groups it derives from the first world it sees (the data
    parallel and world groups among them); the next module's world is a new one, in which those
    groups are not registered."""
    import deepspeed.comm.comm as ds_comm
    from deepspeed.utils import groups

    for name, value in vars(groups).items():
        if name.startswith("_") and "GROUP" in name and value is not None:
            setattr(groups, name, type(value)() if isinstance(value, dict) else None)
    ds_comm.cdb = None
