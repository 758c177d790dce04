"""The one reader of an OpenAI-compatible event stream (vLLM's `/v1/completions` and
`/v1/chat/completions` with `stream: true`): its lines, its events, and which events carry a
generated token. `vtop bench` and `vtop probe` both read streams through it, so their TTFT,
token counts and "held back" verdicts agree on the same stream.

Written by hand: httpx splits lines at U+2028, U+0085 and the like, which a model may generate
inside a JSON string (a random-weight one often does), while the SSE format splits only at CR,
LF and CRLF; and no library knows which of vLLM's events carry a token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_LINE_BYTES = 1 << 20
"""Bytes one event line may hold before the stream is taken as not an event stream."""
DONE = "[DONE]"
TOKEN_KEYS = ("content", "reasoning", "reasoning_content", "tool_calls")
"""What a chat delta carries when the model wrote something: text, reasoning or a tool call."""


class NotAnEventStreamError(ValueError):
    """A line longer than MAX_LINE_BYTES: whatever this is, it is not an event stream."""


@dataclass
class EventLines:
    """Splits the bytes of a stream into SSE lines at CR, LF or CRLF, as they arrive."""

    pending: bytes = field(default=b"")

    def feed(self, data: bytes) -> list[str]:
        """The lines `data` completes (the rest waits for the next bytes)."""
        self.pending += data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *complete, self.pending = self.pending.split(b"\n")
        if len(self.pending) > MAX_LINE_BYTES:
            raise NotAnEventStreamError(f"an event line over {MAX_LINE_BYTES} bytes")
        return [line.decode("utf-8", errors="replace") for line in complete]

    def rest(self) -> list[str]:
        """The last line, when the stream ended without a line break."""
        rest, self.pending = self.pending, b""
        return [rest.decode("utf-8", errors="replace")] if rest else []


def data_of(line: str) -> dict[str, Any] | str | None:
    """A line's event: its JSON object, DONE for `data: [DONE]`, or None for anything else
    (a comment, another field, a payload that is not a JSON object)."""
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if payload == DONE:
        return DONE
    try:
        event = json.loads(payload)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def carries_a_token(event: dict[str, Any]) -> bool:
    """True when a stream event is one vLLM wrote for generated tokens.

    vLLM writes one event per engine step that produced tokens, with the text the detokenizer
    could release, which is empty while a character's bytes are incomplete; those events count
    (the path delivers them like any other), and so do reasoning and tool-call deltas. Chat's
    opening role event carries no token, and the closing usage event has no choice."""
    for choice in event.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        if isinstance(choice.get("text"), str):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and "role" not in delta and _wrote(delta):
            return True
    return False


def _wrote(delta: dict[str, Any]) -> bool:
    """A chat delta carrying what the model wrote."""
    return any(delta.get(key) is not None for key in TOKEN_KEYS)


def usage_of(event: dict[str, Any]) -> tuple[int | None, int | None] | None:
    """(prompt tokens, completion tokens) of an event's `usage`, None when it has none."""
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
    )


def error_of(event: dict[str, Any]) -> tuple[int | None, str] | None:
    """An error event inside a 200 stream (vLLM answers a refusal that way once streaming):
    its code and message."""
    error = event.get("error")
    if not isinstance(error, dict):
        return None
    code = error.get("code")
    return (code if isinstance(code, int) else None, str(error.get("message")))
