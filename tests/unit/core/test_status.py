"""One status word for every verdict, row and severity: worst first, each with its exit code."""

from __future__ import annotations

import json

import pytest

from vtop.core.status import ExitCode, Status, worst, worst_status


def test_statuses_sort_worst_first_and_exit_with_their_code() -> None:
    assert sorted(Status, key=lambda status: status.rank)[0] is Status.CRITICAL
    assert [s.exit_code for s in Status] == [2, 1, 4, 3, 0, 0]
    assert [s for s in Status if not s.troubled] == [Status.INFO, Status.OK]


def test_the_worst_of_several_statuses_and_codes() -> None:
    assert worst_status(["info", "warning", "ok"]) is Status.WARNING
    assert worst_status([]) is Status.OK
    assert worst_status(["unknown", "incomplete"]) is Status.INCOMPLETE
    assert worst([0, 3]) == ExitCode.UNKNOWN  # never 0 while one could not be diagnosed
    assert worst([3, 4]) == ExitCode.INCOMPLETE and worst([64, 0]) == 64


def test_a_status_is_written_as_its_word() -> None:
    assert json.dumps({"verdict": Status.CRITICAL}) == '{"verdict": "critical"}'
    assert f"{Status.OK}" == "ok" and Status("warning") is Status.WARNING
    with pytest.raises(ValueError):
        Status("fine")
