"""A tool call's arguments as one line for a person: what a guard's approval asks about and
what ``plan explain`` lists under each call. An approver sees the command, not only the
tool's name; a file's content is its first line and its size, a command's argv as a shell
reads it."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any, Final

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.wording import counted

VALUE_CHARS: Final = 80  # of one argument's value shown
LINE_CHARS: Final = 300  # of the whole line
FAILURE_CHARS: Final = 160  # of a failed call's output, in questions, decisions and progress


def arguments_line(arguments: Mapping[str, Any], limit: int = LINE_CHARS) -> str:
    """``resource: repo; path: a.py; content: import os (3 lines, 42 characters)``: the
    values shown whole before those summed up (so a cut line keeps what tells calls apart),
    the resource and what the call acts on first; each value cut; controls escaped."""
    shown = {name: _value(value) for name, value in arguments.items()}
    names = sorted(shown, key=lambda name: (shown[name][1], _rank(name)))
    line = "; ".join(f"{name}: {shown[name][0]}" for name in names) or "no arguments"
    line = printable(line, one_line=True)
    return line if len(line) <= limit else line[: limit - 1] + "…"


FIRST: Final = ("resource", "path", "source", "destination", "argv", "sql", "text")


def _rank(name: str) -> int:
    """Where ``name`` goes: the resource, then what the call acts on, then the rest."""
    return FIRST.index(name) if name in FIRST else len(FIRST)


def _value(value: Any) -> tuple[str, bool]:
    """The value as shown, and whether that is a summary of it (a cut or a size)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return _cut(shlex.join(value))  # an argv: as the shell reads it
    return _cut(json.dumps(value, ensure_ascii=False, default=str))


def _text(value: str) -> tuple[str, bool]:
    lines = value.splitlines()
    if len(lines) <= 1 and len(value) <= VALUE_CHARS:
        return value, False
    first = next((line.strip() for line in lines if line.strip()), "")
    size = counted(len(value), "character")
    whole = f"{counted(len(lines), 'line')}, {size}" if len(lines) > 1 else size
    return f"{_cut(first, VALUE_CHARS // 2)[0]} ({whole})", True


def _cut(text: str, limit: int = VALUE_CHARS) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[: limit - 1] + "…", True)


def failure_summary(output: str) -> str:
    """The line of a tool's output that says most about the failure, kept short: the first
    line (a command's exit status), then the first that names a failure, else the last (where
    a program that exits with a message says it)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    telling = [
        line for line in lines if line.startswith(("FAIL", "ERROR", "error", "refused", "Error"))
    ]
    if not lines:
        return "no output"
    detail = telling[0] if telling else lines[-1]
    said = lines[0] if detail == lines[0] else f"{lines[0]}: {detail}"
    return _cut(said, FAILURE_CHARS)[0]
