"""Why an engine died, from the server's log: the fatal error, the exception at its root and
the frame that raised it, the requests in the step that failed (vLLM's input dump), and how
the process ended (an exit code, or a signal: SIGKILL with no traceback is the OOM killer's
mark)."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from vtop.core.config.startup_failures import explain_failure
from vtop.core.forensics.pyspy import CodeFrame
from vtop.core.redact import redactor

FATAL = re.compile(
    r"EngineCore encountered a fatal error|EngineCore failed to start|"
    r"WorkerProc hit an exception|died unexpectedly|Engine core initialization failed|"
    r"EngineDeadError"
)
STARTED = re.compile(r"Application startup complete")
PREFIX = re.compile(
    r"^(\x1b\[[0-9;]*m)*(\([^)]*\)\s*)?(\x1b\[[0-9;]*m)*"
    r"((DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\s+\[[^\]]*\]\s?)?"
)
FILE_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
EXCEPTION = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning))(: (?P<message>.*))?$"
)
DIED = re.compile(r"(?P<who>[\w-]+) died unexpectedly(?: \(exit code: (?P<code>-?\d+)\))?")
REQUEST_IDS = re.compile(r"req_id='?(?P<one>[^',\s)]+)|req_ids=\[(?P<many>[^\]]*)\]")
LOOKBACK_LINES = 600
EXCERPT_LINES = 30


@dataclass(frozen=True)
class RaisedError:
    """One exception of a traceback: its type and message, and the frame that raised it."""

    exception: str
    raised_at: CodeFrame | None
    line_number: int


@dataclass(frozen=True)
class LastWords:
    """What the log says about the engine's death."""

    marker: str
    """The line that says the engine failed (vLLM's own words)."""
    line_number: int
    root: RaisedError | None
    """The first exception of the failure: its cause (a worker's, before the engine core's)."""
    final: RaisedError | None
    """The last exception logged (the engine core's, wrapping the root)."""
    requests: tuple[str, ...]
    """Request ids in the step that failed, from vLLM's dump of its scheduler output."""
    ended: str | None
    """How a process ended, where the log says (exit code or signal)."""
    excerpt: tuple[str, ...]

    @property
    def summary(self) -> str:
        """One sentence: what was raised where, or how the process ended."""
        cause = self.root or self.final
        if cause is not None:
            where = ""
            if cause.raised_at is not None:
                frame = cause.raised_at
                where = f", raised in {frame.function} ({frame.file}:{frame.line})"
            return f"the engine died: {cause.exception}{where}"
        if self.ended:
            return f"the engine died: {self.ended}"
        return f"the engine died: {self.marker}"


def plain_lines(log_text: str) -> list[str]:
    """The log's lines without vLLM's process and level prefixes."""
    return [PREFIX.sub("", line) for line in log_text.splitlines()]


def tracebacks(lines: list[str], start: int) -> list[RaisedError]:
    """Every exception of every traceback from `start` on, in the order logged."""
    found: list[RaisedError] = []
    frame: CodeFrame | None = None
    inside = False
    for index in range(start, len(lines)):
        line = lines[index].rstrip()
        if line.startswith("Traceback (most recent call last)"):
            inside, frame = True, None
            continue
        if not inside:
            continue
        if located := FILE_LINE.match(line):
            frame = CodeFrame(located["function"].strip(), located["file"], int(located["line"]))
            continue
        if EXCEPTION.match(line.strip()) and not line.startswith(" "):
            found.append(RaisedError(redactor().text(line.strip()), frame, index + 1))
            inside = False
    return found


def how_it_ended(lines: list[str], start: int) -> str | None:
    """`VllmWorker-0 died unexpectedly (exit code -9, SIGKILL: ...)` from the log."""
    for line in lines[start:]:
        died = DIED.search(line)
        if died is None:
            continue
        code = died["code"]
        if code is None:
            return f"{died['who']} died unexpectedly"
        return f"{died['who']} {exit_meaning(int(code))}"
    return None


def exit_meaning(code: int) -> str:
    """An exit status in words; a negative one is the signal that ended the process."""
    if code >= 0:
        return f"exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if -code == signal.SIGKILL:
        return (
            f"was killed by {name} with no traceback: the kernel's OOM killer is the usual "
            "sender (`dmesg | grep -i 'killed process'`; lower --max-num-seqs, "
            "--max-num-batched-tokens, or the swap and CPU KV space)"
        )
    return f"was ended by {name}"


def failed_requests(lines: list[str], start: int) -> tuple[str, ...]:
    """The request ids of vLLM's input dump ("Dumping scheduler output ...")."""
    ids: list[str] = []
    for line in lines[start:]:
        if "Dumping scheduler output" not in line:
            continue
        for match in REQUEST_IDS.finditer(line):
            if match["one"]:
                ids.append(match["one"])
            else:
                ids += [i.strip(" '\"") for i in match["many"].split(",") if i.strip(" '\"")]
    return tuple(dict.fromkeys(ids))


def last_words(log_text: str) -> LastWords | None:
    """The last failure of the engine the log records, None when it records none (or the
    server started again after it)."""
    lines = plain_lines(log_text)
    marks = [i for i, line in enumerate(lines) if FATAL.search(line)]
    if not marks:
        return None
    last_mark = marks[-1]
    if any(STARTED.search(line) for line in lines[last_mark:]):
        return None
    started = [i for i in range(last_mark) if STARTED.search(lines[i])]
    start = max(started[-1] if started else 0, last_mark - LOOKBACK_LINES)
    first_mark = next(i for i in marks if i >= start)
    raised = tracebacks(lines, start)
    excerpt_from = max(start, (raised[0].line_number - 25) if raised else first_mark)
    excerpt = tuple(
        redactor().text(line)[:300] for line in lines[excerpt_from : excerpt_from + EXCERPT_LINES]
    )
    return LastWords(
        marker=redactor().text(lines[first_mark].strip())[:300],
        line_number=first_mark + 1,
        root=raised[0] if raised else None,
        final=raised[-1] if raised else None,
        requests=failed_requests(lines, start),
        ended=how_it_ended(lines, start),
        excerpt=excerpt,
    )


def why_it_exited(log_text: str) -> str:
    """Why a server vtop watched exited, in one line: a startup failure explained with its
    fix, else the engine's last words, else nothing."""
    words = last_words(log_text)
    started = STARTED.search(log_text) is not None
    failure = None if started else explain_failure(log_text)
    if failure is not None:
        return f"{failure.explanation} (log line {failure.line_number})"
    if words is None:
        return ""
    line = words.root.line_number if words.root else words.line_number
    return f"{words.summary} (log line {line})"
