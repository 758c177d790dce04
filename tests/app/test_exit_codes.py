"""One exit-code table for every command, and every refusal said in one line with its code:
a dead URL, an HTML page, a value vLLM refuses, a usage mistake (64, never 2, which is
"critical"). Each command runs as a user types it (a subprocess)."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from contextlib import closing, contextmanager

import pytest

from tests.support.http_server import QuietHandler, serving_handler
from tests.support.vtop_cli import ROOT, Ran, vtop
from vtop.core.status import MEANING, ExitCode, worst

DEMO = str(ROOT / "vtop" / "demo" / "storm.vtoprec")
DOC = ROOT / "docs" / "exit-codes.md"
REFUSED_WITHIN_S = 3.0
"""A dead or not-vLLM URL is refused from its first answer."""


class HtmlPage(QuietHandler):
    """Any web server that is not vLLM: an HTML page at every path."""

    def do_GET(self) -> None:
        self.reply(200, b"<html><body>It works!</body></html>", "text/html")

    def do_POST(self) -> None:  # noqa: N802 (http.server names it)
        self.reply(404, b"<html>not found</html>", "text/html")


@contextmanager
def html_server() -> Iterator[str]:
    with serving_handler(HtmlPage) as url:
        yield url


def dead_url() -> str:
    """A loopback port nothing listens on (bound, then closed)."""
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def one_line_refusal(ran: Ran, code: int) -> None:
    """The refusal: its code, one `vtop: error:` line, no traceback or usage block."""
    assert ran.code == code, ran.text
    lines = [line for line in ran.err.splitlines() if line.strip()]
    refusals = [line for line in lines if line.startswith("vtop: error: ")]
    assert len(refusals) == 1 and "Traceback" not in ran.err and "usage:" not in ran.err, ran.err


def test_the_documented_table_is_the_codes_the_code_returns() -> None:
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", DOC.read_text(), re.MULTILINE))
    for code in ExitCode:
        assert str(int(code)) in rows, f"{code.name} ({int(code)}) is not in {DOC.name}"
        assert code in MEANING
    assert ExitCode.USAGE not in (ExitCode.CRITICAL, ExitCode.UNKNOWN, ExitCode.INCOMPLETE)
    assert "exit codes:" in vtop("diagnose", "--help").out
    assert worst([0, 4, 1]) == ExitCode.WARNING and worst([0, 4]) == ExitCode.INCOMPLETE
    assert worst([2, 4, 1]) == ExitCode.CRITICAL and worst([]) == ExitCode.OK


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("diagnose", "--windw", "3"), "did you mean --window?"),
        (("demo", "--speed", "-1"), "must be zero or more"),
        (("whatif", DEMO, "--set", "max-num-seqs=-3"), "at least 1"),
        (("whatif", DEMO, "--set", "max-num-seqs=0"), "at least 1"),
        (("whatif", DEMO, "--to", "80", "--set", "max-num-batched-tokens=8"), "below"),
        (("kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--tp", "3"), "--tp 3"),
        (("help", "nosuch"), "no command 'nosuch'"),
        (("diagnose", "host:abc"), "the port must be a number"),
        (("diagnose", DEMO, "--otlp", "grpc://127.0.0.1:4317"), "a recording holds none"),
        (("requests", "--otlp", "zipkin://127.0.0.1:9411"), "the scheme must be grpc://"),
        (("requests", "ftp://127.0.0.1:8000"), "unsupported scheme 'ftp'"),
    ],
)
def test_usage_mistakes_are_one_line_and_64(args: tuple[str, ...], says: str) -> None:
    ran = vtop(*args)
    one_line_refusal(ran, ExitCode.USAGE)
    assert says in ran.err, ran.err


@pytest.mark.parametrize("kind", ["dead", "html"])
def test_a_dead_or_not_vllm_url_is_refused_from_the_first_answer(kind: str) -> None:
    with html_server() as html:
        url = dead_url() if kind == "dead" else html
        diagnosed = vtop("diagnose", url, "--no-gpu")
        assert diagnosed.code == ExitCode.UNKNOWN, diagnosed.text
        assert diagnosed.seconds < REFUSED_WITHIN_S + 2, diagnosed.seconds  # process start
        assert "could not diagnose" in diagnosed.out
        if kind == "html":
            assert "not a vLLM endpoint" in diagnosed.out or "404" in diagnosed.out
        for args in (
            ("whatif", url, "--set", "max-num-seqs=2"),
            ("probe", url, "--count", "1", "--probe-timeout", "5"),
            ("bench", url, "-n", "1"),
            ("record", url, "-o", "/dev/null", "--duration", "2"),
            ("requests", url),
        ):
            bare = args[0] in ("bench", "requests")
            ran = vtop(*args) if bare else vtop(*args, "--no-gpu")
            one_line_refusal(ran, ExitCode.UNKNOWN)
            assert "Expecting value" not in ran.err and "http" in ran.err, (args, ran.err)
            assert "developer.mozilla.org" not in ran.err, ran.err
