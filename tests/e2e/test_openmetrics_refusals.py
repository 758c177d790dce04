"""OpenMetrics payloads the real Prometheus (Debian's) refuses are the ones vtop flags: each case
is served with the OpenMetrics content type to a Prometheus that scrapes every one, and the
targets it marks down must be exactly the payloads vtop's parser reports a problem with.

The cases are written here, one per rule of the grammar, plus seeded mutations of a real
vLLM 0.32 payload written as OpenMetrics (a line cut short, a double space, an exemplar where
none is allowed, ...). The test first measures its precondition: enough of them refused and
enough accepted, else it fails with the counts.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.support.http_server import QuietHandler, serving_handler
from tests.support.payloads import fixture
from tests.support.prometheus_harness import prometheus_process, target_health
from vtop.core.ingest.exposition import ExpositionParser

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
WRITTEN = {
    "clean": '# TYPE a counter\n# HELP a what it counts\na_total{x="1"} 3 # {id="7"} 1 5\n# EOF\n',
    "empty unit": "# UNIT a_seconds \na_seconds 1\n# EOF\n",
    "unit as suffix": "# TYPE a_seconds gauge\n# UNIT a_seconds seconds\na_seconds 1e3 17\n# EOF\n",
    "exemplar on a gauge named _bucket": '# TYPE g_bucket gauge\ng_bucket 1 # {a="b"} 1\n# EOF\n',
    "no newline after EOF": "a 1\n# EOF",
    "blank line": "a 1\n\n# EOF\n",
    "no EOF": "a 1\n",
    "text after EOF": "a 1\n# EOF\nmore\n",
    "HELP without text": "# HELP a\na 1\n# EOF\n",
    "TYPE untyped": "# TYPE a untyped\na 1\n# EOF\n",
    "TYPE with a trailing space": "# TYPE a gauge \na 1\n# EOF\n",
    "UNIT not a suffix": "# UNIT a seconds\na 1\n# EOF\n",
    "other comment": "# hello\na 1\n# EOF\n",
    "double space": "a  1\n# EOF\n",
    "trailing space": "a 1 \n# EOF\n",
    "tab before the value": "a\t1\n# EOF\n",
    "NaN timestamp": "a 1 NaN\n# EOF\n",
    "hex value": "a 0x1p3\n# EOF\n",
    "trailing comma": 'a{x="1",} 1\n# EOF\n',
    "label twice": 'a{x="1",x="2"} 1\n# EOF\n',
    "exemplar on a gauge": '# TYPE a gauge\na 1 # {id="7"} 1\n# EOF\n',
    "exemplar on a _sum": '# TYPE h histogram\nh_sum 1 # {id="7"} 1\n# EOF\n',
    "exemplar without a space": 'a_total 1 #{id="7"} 1\n# EOF\n',
    "exemplar with an infinite timestamp": 'a_total 1 # {id="7"} 1 +Inf\n# EOF\n',
}
MUTATIONS: dict[str, Callable[[str], str]] = {
    "cut short": lambda line: line[: len(line) // 2],
    "double space": lambda line: line.replace(" ", "  ", 1),
    "trailing space": lambda line: line + " ",
    "blank line after": lambda line: line + "\n",
    "timestamp": lambda line: line + " 1700000000.5",
    "NaN timestamp": lambda line: line + " NaN",
    "exemplar": lambda line: line + ' # {trace="ab"} 1',
    "trailing comma": lambda line: line.replace('"}', '",}', 1),
    "value with underscore": lambda line: line + "_0",
    "untouched": lambda line: line,
}
MUTANTS = 40
AT_LEAST = 10
"""Refused and accepted cases each; fewer means the cases test nothing."""


def openmetrics_payload() -> str:
    """The real vLLM 0.32 capture as OpenMetrics: its lines and `# EOF`."""
    return fixture("underload").rstrip("\n") + "\n# EOF\n"


def mutants(seed: int) -> dict[str, str]:
    """Seeded mutations of one line each of the real payload."""
    lines = openmetrics_payload().split("\n")
    chooser = random.Random(seed)
    found: dict[str, str] = {}
    for index in range(MUTANTS):
        name, mutate = chooser.choice(sorted(MUTATIONS.items()))
        where = chooser.randrange(len(lines) - 2)
        changed = [*lines[:where], mutate(lines[where]), *lines[where + 1 :]]
        found[f"mutant {index}: {name} at line {where + 1}"] = "\n".join(changed)
    return found


def handler_for(bodies: list[bytes]) -> type[BaseHTTPRequestHandler]:
    """Serve case i at /case/i with the OpenMetrics content type."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            index = int(self.path.rsplit("/", 1)[-1])
            self.reply(200, bodies[index], CONTENT_TYPE)

    return Handler


def scrape_config(base: str, count: int) -> str:
    """One job per case, each scraping its own path every second."""
    host = base.removeprefix("http://")
    jobs = "".join(
        f"  - job_name: case{i}\n    metrics_path: /case/{i}\n"
        f"    static_configs:\n      - targets: ['{host}']\n"
        for i in range(count)
    )
    return f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{jobs}"


def prometheus_verdicts(base: str, count: int, workdir: Path) -> dict[int, tuple[str, str]]:
    """Prometheus's health of every case once each has been scraped."""
    with prometheus_process([], workdir, scrape_config=scrape_config(base, count)) as (url, _):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health = {int(u.rsplit("/", 1)[-1]): h for u, h in target_health(url).items()}
            if len(health) == count and all(h[0] != "unknown" for h in health.values()):
                return health
            time.sleep(1)
    pytest.fail(f"Prometheus scraped {len(health)} of {count} cases in 60 s")


def test_vtop_flags_exactly_the_payloads_prometheus_refuses(tmp_path: Path) -> None:
    cases = {**WRITTEN, **mutants(seed=26)}
    names, texts = list(cases), list(cases.values())
    with serving_handler(handler_for([text.encode() for text in texts])) as base:
        verdicts = prometheus_verdicts(base, len(texts), tmp_path)
    refused = sum(health == "down" for health, _ in verdicts.values())
    accepted = len(texts) - refused
    assert refused >= AT_LEAST and accepted >= AT_LEAST, (refused, accepted)
    disagreements = []
    for index, text in enumerate(texts):
        flagged = ExpositionParser().parse(text, openmetrics=True).errors
        health, why = verdicts[index]
        if bool(flagged) != (health == "down"):
            vtop_said = [str(error) for error in flagged] or "nothing"
            disagreements.append(f"{names[index]}: Prometheus {health} ({why}); vtop {vtop_said}")
    print(f"{len(texts)} payloads: Prometheus refused {refused}, accepted {accepted}")
    assert disagreements == []
