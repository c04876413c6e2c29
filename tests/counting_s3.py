"""A moto S3 server on 127.0.0.1 that counts the body bytes it sends for each object, so a test
can tell what a reader downloaded (`python tests/counting_s3.py PORT`; `served(env)` reads the
counts as {"bucket/key": bytes}, `reset(env)` zeroes them)."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from collections import Counter

COUNTS_PATH = "/_served_bytes"


class CountingApp:
    """WSGI middleware: body bytes of every GET response, by request path."""

    def __init__(self, app) -> None:
        self.app = app
        self.counts: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == COUNTS_PATH:
            if environ["REQUEST_METHOD"] == "DELETE":
                with self.lock:
                    self.counts.clear()
            with self.lock:
                body = json.dumps(dict(self.counts)).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        chunks = self.app(environ, start_response)
        if environ["REQUEST_METHOD"] != "GET":
            return chunks
        return self._counted(path.lstrip("/"), chunks)

    def _counted(self, key: str, chunks):
        try:
            for chunk in chunks:
                with self.lock:
                    self.counts[key] += len(chunk)
                yield chunk
        finally:
            if hasattr(chunks, "close"):
                chunks.close()


def served(env: dict) -> dict[str, int]:
    with urllib.request.urlopen(env["AWS_ENDPOINT_URL"] + COUNTS_PATH, timeout=30) as response:
        return json.loads(response.read())


def reset(env: dict) -> None:
    request = urllib.request.Request(env["AWS_ENDPOINT_URL"] + COUNTS_PATH, method="DELETE")
    urllib.request.urlopen(request, timeout=30).close()


def main(port: int) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = CountingApp(DomainDispatcherApplication(create_backend_app))
    make_server("127.0.0.1", port, app, threaded=True).serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
