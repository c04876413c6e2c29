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
    torch.nn.functional.linear = linear  # or every later test's Linear runs DeepSpeed's wrapper
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
