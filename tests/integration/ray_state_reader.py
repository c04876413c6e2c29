"""Ray's state API read through one process of its own, for a test module that reads it often
while its own Ray runtime comes and goes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

STATE_READER = """
import json, sys
from ray.util import state
for line in sys.stdin:
    what, filters = json.loads(line)
    try:
        items = getattr(state, f"list_{what}")(
            address=sys.argv[1], limit=10000, detail=True, filters=[tuple(f) for f in filters]
        )
        rows = [i.__dict__ if hasattr(i, "__dict__") else dict(i) for i in items]
        print("ROWS " + json.dumps(rows, default=str), flush=True)
    except Exception as exc:
        print("ERROR " + repr(exc).replace("\\n", " "), flush=True)
"""
"""Answers a line `[what, filters]` with a line of Ray's state API's items (`ROWS [...]`): one
process and one import of Ray for every read of the module."""


class StateReader:
    """Nodes, jobs or tasks from Ray's state API, read in a process of its own (not this one,
    whose Ray runtime comes and goes) with the cluster's token."""

    def __init__(self, address: str, env: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", STATE_READER, address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **env},
        )

    def read(self, what: str, filters: list | None = None) -> list[dict]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps([what, filters or []]) + "\n")
        self.proc.stdin.flush()
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], 120)
            assert ready, "the state API did not answer within 120 s"
            line = self.proc.stdout.readline()
            assert line, f"the state reader exited {self.proc.poll()}"
            if line.startswith(("ROWS ", "ERROR ")):
                break
        assert line.startswith("ROWS "), line
        return json.loads(line.removeprefix("ROWS "))

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
