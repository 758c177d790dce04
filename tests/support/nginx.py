"""A real nginx (Debian's) in front of a real vLLM: started by the test with its own prefix,
config and free port on 127.0.0.1, stopped by its pid (never by name)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.vllm_harness.server import free_port

CONFIG = """\
worker_processes 1;
daemon off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://127.0.0.1:{upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
{location}
    }}
  }}
}}
"""

CLEAN = "proxy_buffering off; proxy_cache off; gzip off;"
"""The lines that let an event stream through as it is written."""
BUFFERED = (
    "proxy_buffering on; proxy_buffers 16 64k; proxy_buffer_size 64k; "
    "gzip on; gzip_min_length 1; gzip_types text/event-stream application/json;"
)
"""A common production config: nginx's default buffering, and gzip for every API response."""
SHORT_READ_TIMEOUT = CLEAN + " proxy_read_timeout 1s;"
"""A read timeout shorter than a queued request's silence before its first token."""
RATE_LIMITED = "proxy_buffering on; proxy_max_temp_file_size 0; gzip off; limit_rate 300;"
"""A per-connection rate limit of 300 bytes/s (about one of vLLM's chunks a second) on nginx's
default buffering, which passes each chunk on as it comes: the stream arrives slower than vLLM
writes it. nginx applies `limit_rate` only to a buffered proxy (measured on Debian's 1.22:
with `proxy_buffering off` the same limit paces nothing). No temporary file: with one, the
stream was cut after its first chunk under the test's private directory (likely because the
workers run as nobody and cannot write there)."""
UNLIMITED = "proxy_buffering on; gzip off;"
"""The same path without the rate limit."""
NO_USAGE = (
    CLEAN
    + " sub_filter_types text/event-stream; sub_filter '\"usage\"' '\"u\"'; sub_filter_once off;"
)
"""A rewriting hop that mangles the usage chunk (as an old gateway that drops it does)."""


def nginx_binary() -> str:
    """nginx from Debian's nginx-light; the test fails (never skips) without it."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        pytest.fail("no nginx: install Debian's nginx-light (scripts/test does)")
    return found


@contextlib.contextmanager
def nginx_in_front(upstream_url: str, location: str, prefix: Path) -> Iterator[str]:
    """An nginx proxying to `upstream_url` with these location lines; yields its URL."""
    prefix.mkdir(parents=True, exist_ok=True)
    port = free_port()
    upstream = int(upstream_url.rsplit(":", 1)[1])
    config = prefix / "nginx.conf"
    config.write_text(
        CONFIG.format(prefix=prefix, port=port, upstream=upstream, location="      " + location)
    )
    process = subprocess.Popen(
        [nginx_binary(), "-p", str(prefix), "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, prefix)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], prefix: Path) -> None:
    """Until nginx answers (its error log when it exits)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = (prefix / "error.log").read_text() if (prefix / "error.log").exists() else ""
            raise RuntimeError(f"nginx exited: {log[-2000:]}")
        try:
            httpx.get(url + "/health", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("nginx did not answer within 20 s")
