"""Secrets never leave: API keys, tokens, URL passwords and secret environment values are
replaced before vtop writes or shows anything (state, audit, logs, bundles, recordings, JSON,
screens, the argv of its children)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

REDACTED = "<redacted>"
SECRET_NAME = re.compile(
    r"(api[_-]?key|[_-]key$|^key$|token$|secret|password|passwd|credential)", re.IGNORECASE
)
"""A flag, environment variable or setting whose value is a secret (`--api-key`, `HF_TOKEN`,
`AWS_SECRET_ACCESS_KEY`, `api_key` in vLLM's non-default args), not `max_tokens`."""
NOT_SECRET = frozenset({"--ssl-keyfile", "--ssl-certfile"})
"""Names that match the pattern but hold paths, not secrets."""
KEYED = re.compile(
    r"""(['"]?\b[\w-]*(?:api[_-]?key|_key|token|secret|password)['"]?\s*[:=]\s*)"""
    r"""(\[[^\]]*\]|'[^']*'|"[^"]*"|[^\s,}]+)""",
    re.IGNORECASE,
)
"""`api_key: ['sk-...']`, `"hf_token": "..."`, `password=...` inside free text."""
BEARER = re.compile(r"(Bearer\s+)\S+", re.IGNORECASE)
USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@/\s]*@", re.IGNORECASE)
MIN_SECRET_LENGTH = 4
"""Shorter values are not searched for in free text (they would match everywhere)."""


def is_secret_name(name: str) -> bool:
    """True for a flag, variable or setting name that holds a secret."""
    return name not in NOT_SECRET and SECRET_NAME.search(name.lstrip("-")) is not None


def url(text: str) -> str:
    """A URL with any password replaced (the user name is kept)."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return USERINFO.sub(rf"\g<1>{REDACTED}@", text)
    if parts.password is None:
        return text
    host = parts.hostname or ""
    netloc = f"{parts.username}:{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def secrets_in_argv(argv: Sequence[str]) -> list[str]:
    """Values of secret flags (`--api-key X`, `--api-key=X`) in an argv."""
    found = []
    for index, word in enumerate(argv):
        flag, equals, value = word.partition("=")
        if flag.startswith("-") and is_secret_name(flag):
            if equals:
                found.append(value)
            elif index + 1 < len(argv):
                found.append(argv[index + 1])
    return found


def secrets_in_env(env: Mapping[str, str]) -> list[str]:
    """Values of secret environment variables."""
    return [value for name, value in env.items() if is_secret_name(name) and value]


class Redactor:
    """Replaces a set of known secret values, secret flags' values and URL passwords."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len)[::-1]

    @staticmethod
    def of(argv: Sequence[str] = (), env: Mapping[str, str] | None = None) -> Redactor:
        """A redactor that knows the secrets given in an argv and an environment."""
        return Redactor([*secrets_in_argv(argv), *secrets_in_env(env or {})])

    def text(self, text: str) -> str:
        """Free text (a log line, an error) with every known secret, bearer token and URL
        password replaced."""
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        text = KEYED.sub(rf"\g<1>{REDACTED}", text)
        return USERINFO.sub(rf"\g<1>{REDACTED}@", BEARER.sub(rf"\g<1>{REDACTED}", text))

    def value(self, value: object) -> object:
        """Any JSON-like value with secrets replaced: secret-named keys, argv-like lists, text."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: REDACTED if isinstance(k, str) and is_secret_name(k) else self.value(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            if all(isinstance(item, str) for item in value):
                return self.argv([str(item) for item in value])
            return [self.value(item) for item in value]
        return value

    def argv(self, argv: Sequence[str]) -> list[str]:
        """An argv with the values of secret flags replaced."""
        shown: list[str] = []
        hide_next = False
        for word in argv:
            flag, equals, _ = word.partition("=")
            if hide_next:
                shown.append(REDACTED)
                hide_next = False
            elif flag.startswith("-") and is_secret_name(flag):
                shown.append(f"{flag}={REDACTED}" if equals else word)
                hide_next = not equals
            else:
                shown.append(self.text(word))
        return shown

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """An environment with secret values replaced."""
        return {k: REDACTED if is_secret_name(k) else self.text(v) for k, v in env.items()}


_REMEMBERED: set[str] = set()
"""Secret values this vtop process was given (its servers' keys, its own --api-key)."""


def remember(*values: str | None) -> None:
    """Add secret values every later redaction replaces."""
    _REMEMBERED.update(v for v in values if v and len(v) >= MIN_SECRET_LENGTH)


def remembered(value: str | None) -> str | None:
    """`value`, remembered as a secret (for a flag's value that is one)."""
    remember(value)
    return value


def redactor() -> Redactor:
    """A redactor for what vtop writes or shows now: every secret value it was given, plus the
    secret variables of its own environment."""
    return Redactor([*_REMEMBERED, *secrets_in_env(os.environ)])
