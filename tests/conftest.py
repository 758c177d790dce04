"""Shared fixtures: the real vLLM server pool (fails, never skips, when vLLM is missing)."""

from __future__ import annotations

import atexit
from collections.abc import Iterator

import pytest

from tests.support.vllm_harness.server import CACHE, ServerPool, VllmMissingError, vllm_python


@pytest.fixture(scope="session")
def vllm_pool() -> Iterator[ServerPool]:
    """Real vLLM servers shared by spec across the session, stopped at the end."""
    try:
        vllm_python()
    except VllmMissingError as error:
        pytest.fail(str(error))
    # four kept: in the suite's order, six specs, each started once (with three, three of them
    # were started twice: 9 starts; with two, 12). A start costs 40 to 60 s on a busy 2-core
    # host; an idle server about 3 GB of the 24 (API server, engine core and worker), so four
    # idle beside the lifecycle test's own server leave room
    pool = ServerPool(CACHE / "logs", keep=4)
    atexit.register(pool.stop_all)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(autouse=True)
def private_state(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Each test's vtop state (audit log, managed servers, the model's step profiles) in its own
    directory: nothing one test learns or writes reaches another, or the user's own."""
    monkeypatch.setenv("VTOP_STATE_DIR", str(tmp_path_factory.mktemp("state")))


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--slow`: the long variants (more generated examples in the PromQL conformance test)."""
    parser.addoption("--slow", action="store_true", help="run the long variants of the tests")


@pytest.fixture(scope="session")
def slow(request: pytest.FixtureRequest) -> bool:
    """Whether `--slow` was given."""
    return bool(request.config.getoption("--slow"))
