"""Where the engine is (its processes' stacks) and why it died (its log), as text and JSON."""

from __future__ import annotations

from typing import Any

from vtop.core.forensics.classify import (
    Activity,
    EngineWhereabouts,
    ProcessActivity,
    frame_text,
    short_file,
)
from vtop.core.forensics.last_words import LastWords, RaisedError
from vtop.core.forensics.processes import NotVisible
from vtop.core.forensics.pyspy import CodeFrame

TOP_FRAMES = 8

MEANING = {
    Activity.SPINNING: "spinning in code outside vLLM and torch",
    Activity.BLOCKED: "blocked (on a lock, a queue, a sleep) in code outside vLLM",
    Activity.STOPPED: "stopped by a signal (SIGSTOP, or a debugger): `kill -CONT {pid}` resumes it",
    Activity.GONE: "gone: the process exited and was not reaped",
    Activity.COLLECTIVE: "inside a collective or a device synchronisation",
    Activity.TOKENIZER: "in the tokenizer on the API side",
    Activity.WAITING_ON_WORKER: "waiting on its worker",
    Activity.COMPUTING: "computing in vLLM or torch (a step in progress: not stuck here)",
    Activity.WAITING_FOR_WORK: "waiting for work (idle)",
    Activity.UNKNOWN: "not read",
}


def meaning(activity: ProcessActivity) -> str:
    """What an activity means, for its process."""
    return MEANING[activity.activity].format(pid=activity.process.pid)


def _who(activity: ProcessActivity) -> str:
    return f"the {activity.process.role} (pid {activity.process.pid})"


def whereabouts_lines(found: EngineWhereabouts | NotVisible) -> list[str]:
    """The engine's whereabouts as report lines (a heading, then indented detail)."""
    if isinstance(found, NotVisible):
        return ["WHERE THE ENGINE IS: not read", f"  {found.reason}"]
    speaker = found.speaker
    if speaker is None:
        return ["WHERE THE ENGINE IS: no vLLM engine process found below the server"]
    samples = f"{speaker.share * speaker.samples:.0f} of {speaker.samples} samples"
    lines = [
        f"WHERE THE ENGINE IS: {found.activity.upper()} "
        f"({samples} over {found.span_s:.1f} s, py-spy)",
        f"  {_who(speaker)} is {meaning(speaker)}",
    ]
    if speaker.where is not None:
        lines.append(f"  at {frame_text(speaker.where)}")
        lines.append(f"  whose code: {found.owner}")
    if found.via is not None:
        where = f" in {frame_text(found.via.where)}" if found.via.where else ""
        lines.append(f"  {_who(found.via)} is {meaning(found.via)}{where}")
    if speaker.stack:
        lines.append(f"  top frames ({_who(speaker)}, innermost first):")
        lines += [f"    {frame_text(frame)}" for frame in speaker.stack[:TOP_FRAMES]]
    lines.append("  processes:")
    for activity in found.processes:
        state = f"{activity.process.state}"
        note = f" ({activity.refused})" if activity.refused else ""
        where = f" at {frame_text(activity.where)}" if activity.where else ""
        lines.append(
            f"    {activity.process.pid:>7} {activity.process.role:<11} {state:<9} "
            f"{activity.activity}{where}{note}"
        )
    return lines


def _frame_json(frame: CodeFrame | None) -> dict[str, Any] | None:
    if frame is None:
        return None
    return {"function": frame.function, "file": frame.file, "line": frame.line}


def _activity_json(activity: ProcessActivity) -> dict[str, Any]:
    return {
        "pid": activity.process.pid,
        "role": str(activity.process.role),
        "state": activity.process.state,
        "activity": str(activity.activity),
        "where": _frame_json(activity.where),
        "share": round(activity.share, 3),
        "samples": activity.samples,
        "stack": [_frame_json(frame) for frame in activity.stack[:TOP_FRAMES]],
        "refused": activity.refused,
    }


def whereabouts_json(found: EngineWhereabouts | NotVisible) -> dict[str, Any]:
    """The engine's whereabouts as the JSON reports' `stacks` section."""
    if isinstance(found, NotVisible):
        return {"read": False, "reason": found.reason}
    speaker = found.speaker
    return {
        "read": True,
        "activity": str(found.activity),
        "stuck": found.stuck,
        "process": None if speaker is None else _activity_json(speaker),
        "owner": found.owner,
        "via": None if found.via is None else _activity_json(found.via),
        "span_s": round(found.span_s, 2),
        "processes": [_activity_json(a) for a in found.processes],
    }


def _raised_text(raised: RaisedError) -> str:
    where = raised.raised_at
    place = f" at {where.function} ({short_file(where.file)}:{where.line})" if where else ""
    return f"{raised.exception}{place} (log line {raised.line_number})"


def last_words_lines(words: LastWords) -> list[str]:
    """Why the engine died, as report lines."""
    lines = ["WHY IT DIED (the server's log)", f"  {words.summary}"]
    lines.append(f"  vLLM said (line {words.line_number}): {words.marker}")
    if words.root is not None:
        lines.append(f"  root cause: {_raised_text(words.root)}")
    if words.final is not None and words.final != words.root:
        lines.append(f"  then: {_raised_text(words.final)}")
    if words.requests:
        lines.append(f"  requests in the failed step: {', '.join(words.requests[:10])}")
    if words.ended:
        lines.append(f"  ended: {words.ended}")
    return lines


def _raised_json(raised: RaisedError | None) -> dict[str, Any] | None:
    if raised is None:
        return None
    return {
        "exception": raised.exception,
        "raised_at": _frame_json(raised.raised_at),
        "log_line": raised.line_number,
    }


def last_words_json(words: LastWords) -> dict[str, Any]:
    """Why the engine died, as the JSON reports' `last_words` section."""
    return {
        "summary": words.summary,
        "marker": words.marker,
        "log_line": words.line_number,
        "root": _raised_json(words.root),
        "final": _raised_json(words.final),
        "requests": list(words.requests),
        "ended": words.ended,
        "excerpt": list(words.excerpt),
    }
