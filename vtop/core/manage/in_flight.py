"""What `vtop serve` adds to vLLM so that it lists its requests in flight: vtop's middleware
(`vtop_inflight`, standard library only) copied into the state directory, that directory on
vLLM's PYTHONPATH, and `--middleware vtop_inflight.InFlight`. A copy, not vtop's own
site-packages on the path: vLLM's environment must not see vtop's other packages."""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from vtop.core.managed_server import private_directory, write_private

MODULE = "vtop_inflight"
MIDDLEWARE_FLAG = "--middleware"
MIDDLEWARE = f"{MODULE}.InFlight"


def in_flight_middleware(
    state_directory: Path, environ: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The `vllm serve` flags and environment that load the middleware, after writing its
    file (0600, in a 0700 folder) under the state directory; PYTHONPATH keeps what the
    environment already had after the folder."""
    folder = state_directory / "python"
    private_directory(folder)
    source = resources.files("vtop.core.manage").joinpath(f"{MODULE}.py").read_text()
    write_private(folder / f"{MODULE}.py", source)
    path = os.pathsep.join(p for p in (str(folder), environ.get("PYTHONPATH", "")) if p)
    return [MIDDLEWARE_FLAG, MIDDLEWARE], {"PYTHONPATH": path}
