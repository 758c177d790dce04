"""Endpoints that misbehave on the wire: a real socket server answering with raw bytes."""

from __future__ import annotations

import gzip
import socketserver
import ssl
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from tests.support.payloads import fixture

Behaviour = Callable[[socketserver.StreamRequestHandler], None]
BODY = fixture("underload").encode()
HEAD = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"


def _read_request(handler: socketserver.StreamRequestHandler) -> None:
    """Consume the request head."""
    while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
        pass


def trickle(sized: bool) -> Behaviour:
    """A valid head, then the body one byte every 0.5 s (with or without Content-Length)."""

    def serve(handler: socketserver.StreamRequestHandler) -> None:
        _read_request(handler)
        length = f"Content-Length: {len(BODY)}\r\n" if sized else "Connection: close\r\n"
        handler.wfile.write((HEAD + length + "\r\n").encode())
        for byte in BODY:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.5)

    return serve


def trickle_chunked(handler: socketserver.StreamRequestHandler) -> None:
    """Chunked, one one-byte chunk every 0.5 s."""
    _read_request(handler)
    handler.wfile.write((HEAD + "Transfer-Encoding: chunked\r\n\r\n").encode())
    for byte in BODY:
        handler.wfile.write(b"1\r\n" + bytes([byte]) + b"\r\n")
        handler.wfile.flush()
        time.sleep(0.5)


def huge(total: int, sized: bool) -> Behaviour:
    """`total` bytes of repeated metrics (Content-Length, or chunked and endless when total < 0)."""

    def serve(handler: socketserver.StreamRequestHandler) -> None:
        _read_request(handler)
        framing = f"Content-Length: {total}\r\n" if sized else "Transfer-Encoding: chunked\r\n"
        handler.wfile.write((HEAD + framing + "\r\n").encode())
        sent, block = 0, BODY * 20
        while total < 0 or sent < total:
            part = block if total < 0 else block[: total - sent]
            handler.wfile.write(part if sized else f"{len(part):x}\r\n".encode() + part + b"\r\n")
            sent += len(part)

    return serve


@cache
def gzip_bomb(megabytes: int = 2048) -> bytes:
    """About 2 MB of gzip that inflates to `megabytes` MiB of zeros.

    Built from one fully flushed deflate block repeated (a full flush resets the compressor, so
    every block of zeros compresses to the same bytes), with the gzip trailer computed.
    """
    zeros = bytes(1024 * 1024)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    assert packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH) == block
    end = packer.flush(zlib.Z_FINISH)
    crc = 0
    for _ in range(megabytes):
        crc = zlib.crc32(zeros, crc)
    size = (megabytes * len(zeros)) & 0xFFFFFFFF
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + block * megabytes + end + struct.pack("<II", crc, size)


def bomb(handler: socketserver.StreamRequestHandler) -> None:
    """A gzip-encoded body that inflates far past any limit."""
    _read_request(handler)
    payload = gzip_bomb()
    head = HEAD + f"Content-Encoding: gzip\r\nContent-Length: {len(payload)}\r\n\r\n"
    handler.wfile.write(head.encode() + payload)


def gzipped(handler: socketserver.StreamRequestHandler) -> None:
    """A well-behaved gzip-encoded /metrics (what a proxy in front of vLLM may send)."""
    _read_request(handler)
    payload = gzip.compress(BODY)
    head = HEAD + f"Content-Encoding: gzip\r\nContent-Length: {len(payload)}\r\n\r\n"
    handler.wfile.write(head.encode() + payload)


def cut_stream(handler: socketserver.StreamRequestHandler) -> None:
    """A completions endpoint whose stream is cut: /v1/models answers, a completion gets a 200
    chunked SSE head and two tokens, then the connection closes with no last chunk (a proxy's
    read timeout, a server that died)."""
    request = handler.rfile.readline()
    length = 0
    while (line := handler.rfile.readline()) not in (b"\r\n", b"\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    handler.rfile.read(length)
    if request.startswith(b"GET /v1/models"):
        body = b'{"data": [{"id": "m"}]}'
        # the server closes after each answer, so it says so: a client would otherwise send
        # the completion on this connection while it closes (no response, not a cut stream)
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        handler.wfile.write(head.encode() + body)
        return
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    handler.wfile.write((head + "\r\n").encode())
    for word in ("one", "two"):
        event = b'data: {"choices": [{"text": " %s"}]}\n\n' % word.encode()
        handler.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        handler.wfile.flush()
        time.sleep(0.05)
    handler.connection.shutdown(2)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@cache
def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, its address in the subject alternative name as
    a client verifying it requires (openssl, made once per directory)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@contextmanager
def hostile(behaviour: Behaviour, tls: Path | None = None) -> Iterator[str]:
    """Serve `behaviour` on a free loopback port (TLS with a certificate in `tls`); yield the
    base URL; always shut down."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            try:
                behaviour(self)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                return

    server = _Server(("127.0.0.1", 0), Handler)
    if tls is not None:
        cert, key = certificate(tls)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if tls is not None else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
