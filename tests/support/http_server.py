"""A small real HTTP server on 127.0.0.1 serving canned /metrics responses, for scrape tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Canned:
    """What the server answers; tests change it between scrapes."""

    body: str = ""
    status: int = 200
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    seen_headers: list[dict[str, str]] = field(default_factory=list)
    others: dict[str, str] = field(default_factory=dict)
    """Bodies of other paths (200, JSON), e.g. {"/version": '{"version": "0.32.0"}'}."""
    seen_paths: list[str] = field(default_factory=list)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing; `reply` sends a whole response."""

    def reply(self, status: int, payload: bytes, content_type: str = "text/plain") -> None:
        """Status, Content-Type, Content-Length and the body."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


def _handler(canned: Canned) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            canned.seen_headers.append(dict(self.headers.items()))
            canned.seen_paths.append(self.path)
            if self.path in canned.others:
                self.reply(200, canned.others[self.path].encode(), "application/json")
            else:
                self.reply(canned.status, canned.body.encode(), canned.content_type)

    return Handler


@contextmanager
def serving(canned: Canned) -> Iterator[str]:
    """Serve `canned` on a free loopback port; yield the base URL; always shut down."""
    with serving_handler(_handler(canned)) as url:
        yield url


@contextmanager
def serving_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Run a request handler on a free loopback port; yield the base URL; always shut down."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
