"""A trap: a real HTTP server on 127.0.0.1 that counts every request it gets.

Schemas under attack refer to it (``$ref``); a test asserts it was never reached. It
answers like a server an attacker would point at (a schema holding a secret), so a
fetch, had one happened, would also show up in the output.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_SCHEMA = json.dumps({"enum": ["INTERNAL-SECRET-42"]}).encode()


class Trap:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def ref(self, path: str = "secret.json") -> str:
        return self.url + path


@contextmanager
def trap_server() -> Iterator[Trap]:
    """A started trap; stopped (and its thread joined) on exit."""
    trap: Trap

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            trap.requests.append(f"{self.command} {self.path}")
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(SECRET_SCHEMA)))
            self.end_headers()
            self.wfile.write(SECRET_SCHEMA)

        do_GET = do_POST = do_HEAD = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    trap = Trap(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield trap
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
