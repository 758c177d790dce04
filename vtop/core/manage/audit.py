"""The audit log: one JSON line per action vtop takes on a managed server (redacted, 0600)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from vtop.core.managed_server import private_directory
from vtop.core.redact import redactor


def audit(directory: Path, action: str, **details: object) -> None:
    """Append one action to the audit log (JSON lines)."""
    private_directory(directory)
    plain = json.loads(
        json.dumps({"time": time.time(), "action": action, **details}, default=_plain)
    )
    path = directory / "audit.log"
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a") as log:
        os.chmod(path, 0o600)
        log.write(json.dumps(redactor().value(plain)) + "\n")


def _plain(value: object) -> object:
    """JSON for dataclasses and tuples in audit entries."""
    if hasattr(value, "__dataclass_fields__"):
        return asdict(value)  # type: ignore[call-overload]
    return str(value)
