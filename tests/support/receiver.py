"""A local HTTP server standing in for what the console calls out to — a webhook receiver, Alertmanager, a
node, or an address the outgoing-URL checks must refuse: it records every request and answers what the test
sets (:attr:`Receiver.answer`, by default ``200`` with an empty body)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, str, bytes]
"""Status, content type and body of a reply."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _empty(_request: Request) -> Answer:
    return 200, "text/plain", b""


@dataclass
class Receiver:
    url: str = ""
    received: list[Request] = field(default_factory=list)
    connections: int = 0  # TCP connections accepted, with a request or not (a refused call makes none)
    answer: Callable[[Request], Answer] = _empty

    def answer_by_path(self, table: dict[str, Answer], missing: Answer = (404, "text/plain", b"no")) -> None:
        """Answer each request with ``table[path]`` (its query string ignored), else ``missing``."""
        self.answer = lambda request: table.get(request.path.split("?")[0], missing)


@contextmanager
def receiving() -> Iterator[Receiver]:
    """A :class:`Receiver` listening on a free loopback port for the block (``url`` has no trailing slash)."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = Request(self.command, self.path, dict(self.headers), self.rfile.read(length) if length else b"")
            receiver.received.append(request)
            status, kind, body = receiver.answer(request)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _handle

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def verify_request(self, request: Any, client_address: Any) -> bool:
            receiver.connections += 1
            return True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
