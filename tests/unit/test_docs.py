"""The pages a user reads: every `vtop ...` command line in the README and docs/ parses with the
real argument parser, every relative link resolves (file and anchor), the README stays a user's
page, and the rules reference is the one `vtop rules doc` writes."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from vtop.cli.commands import COMMANDS
from vtop.cli.dashboard import monitor_parser
from vtop.core.rules.loader import load_rules
from vtop.text.metrics_reference import metrics_reference
from vtop.text.rules_reference import rules_reference

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
INLINE = re.compile(r"`(vtop [^`]+)`")
SYNOPSIS = re.compile(r"[\[\]{}<>]|\.\.\.|\bCMD\b|\bCOMMAND\b")
"""Marks of a usage synopsis (`[--flag]`, `A|B`, `...`), not a command line to run."""


def code_blocks(text: str) -> Iterator[list[str]]:
    """The fenced code blocks of a page, each as its lines (continuation lines joined)."""
    block: list[str] | None = None
    pending = ""
    for line in text.splitlines():
        if FENCE.match(line):
            if block is not None:
                yield block
            block = [] if block is None else None
            continue
        if block is None:
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        block.append(pending + line)
        pending = ""


def commands_in(page: Path) -> Iterator[str]:
    """Every `vtop ...` invocation the page shows: in code blocks (only the `$ ` lines of a
    block that has prompts: the others are output) and in inline code (a span that only
    names a command, like `vtop replay`, is prose)."""
    text = page.read_text()
    for block in code_blocks(text):
        prompted = any(line.startswith("$ ") for line in block)
        for line in block:
            if prompted and not line.startswith("$ "):
                continue
            command = line.strip().removeprefix("$ ")
            if command.startswith("vtop ") or command == "vtop":
                yield command
    for match in INLINE.finditer(text):
        words = match.group(1).split()
        if not (len(words) == 2 and words[1] in COMMANDS):
            yield match.group(1)


def runnable(command: str) -> list[str] | None:
    """The argv of a command line (what follows the first pipe, redirect or comment dropped),
    None for a usage synopsis."""
    command = command.split(" #", 1)[0]
    for mark in (" | ", " > ", " && ", " 2>"):
        command = command.split(mark, 1)[0]
    if SYNOPSIS.search(command) or "|" in command:
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words[1:]


def parse(argv: list[str]) -> None:
    """Parse with the parser vtop itself uses (SystemExit on a mistake)."""
    if argv and argv[0] in COMMANDS:
        name, rest = argv[0], argv[1:]
        if name == "serve" and "--" in rest:
            rest = rest[: rest.index("--")]
        COMMANDS[name].argument_parser().parse_args(rest)
    elif argv[:1] in (["--help"], ["-h"], ["-V"], ["--version"]) or argv[:1] == ["help"]:
        return
    else:
        monitor_parser().parse_args(argv)


def every_command() -> list[tuple[str, str]]:
    return [(page.name, command) for page in PAGES for command in commands_in(page)]


def test_the_pages_show_commands_at_all() -> None:
    shown = every_command()
    assert len(shown) > 60 and {"README.md"} <= {page for page, _ in shown}


@pytest.mark.parametrize(("page", "command"), every_command())
def test_every_command_line_in_the_docs_parses(page: str, command: str) -> None:
    argv = runnable(command)
    if argv is None:
        return
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            parse(argv)
    except SystemExit as stop:
        assert stop.code == 0, f"{page}: `{command}`: {errors.getvalue().strip()}"
    except argparse.ArgumentError as error:
        raise AssertionError(f"{page}: `{command}`: {error}") from None


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor in a Markdown page (outside code blocks)."""
    found, inside = set(), False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_resolves_to_a_file_and_anchor(page: Path) -> None:
    broken = []
    for match in LINK.finditer(page.read_text()):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        file = (page.parent / path_part).resolve() if path_part else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor")
    assert broken == [], f"{page.name}: {broken}"


def test_the_readme_is_a_users_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 320, len(lines)
    text = "\n".join(lines)
    for must in ("pipx install .", "uv tool install .", "pip install .", "not published"):
        assert must in text, must
    for command in ("vtop demo", "vtop diagnose", "scripts/test"):
        assert command in text, command


def test_the_rules_reference_is_what_vtop_rules_doc_writes() -> None:
    written = (ROOT / "docs" / "rules.md").read_text()
    assert written == rules_reference(load_rules()), "run: vtop rules doc > docs/rules.md"
    for rule in load_rules():
        assert slug(rule.id) in anchors(ROOT / "docs" / "rules.md"), rule.id


def test_the_metrics_reference_is_what_vtop_rules_metrics_writes() -> None:
    written = (ROOT / "docs" / "metrics.md").read_text()
    assert written == metrics_reference(load_rules()), "run: vtop rules metrics > docs/metrics.md"
