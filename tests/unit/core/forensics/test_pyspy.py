"""py-spy's JSON read into stacks, and its failures as one sentence with the fix."""

from __future__ import annotations

import json

import pytest

from vtop.core.forensics.pyspy import PTRACE_FIX, parse_dump, refusal

DUMP = [
    {
        "pid": 7,
        "thread_id": 1,
        "thread_name": "MainThread",
        "active": True,
        "owns_gil": True,
        "frames": [
            {"name": "spin", "filename": "/srv/x.py", "line": 4},
            {"name": "<module>", "filename": "/srv/x.py", "line": 9},
        ],
    }
]


def test_a_dump_is_read_innermost_first() -> None:
    [thread] = parse_dump(json.dumps(DUMP))
    assert thread.name == "MainThread" and thread.active and thread.owns_gil
    assert [(f.function, f.line) for f in thread.frames] == [("spin", 4), ("<module>", 9)]


@pytest.mark.parametrize("text", ["", "{", '{"threads": 1}', "[1]", '[{"frames": [1]}]'])
def test_anything_else_is_refused_as_a_value_error(text: str) -> None:
    with pytest.raises((ValueError, TypeError, AttributeError)):
        parse_dump(text)


def test_a_permission_failure_says_how_to_allow_it() -> None:
    said = refusal(7, "Error: Permission Denied (os error 13)\n")
    assert said.reason.startswith("process 7: not allowed") and PTRACE_FIX in said.reason
    assert "is gone" in refusal(7, "Error: Failed to find process: No such process").reason
    assert "py-spy could not read it (Error: odd)" in refusal(7, "Error: odd\n").reason
