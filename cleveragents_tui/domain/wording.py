"""Wording in messages people read: counts (``1 warning``, ``3 warnings``, never ``3
warning(s)``), and the ``--as NAME`` a suggested command repeats."""

from __future__ import annotations

import shlex


def counted(number: float, thing: str, plural: str | None = None) -> str:
    """``number`` and ``thing``, plural unless the number is one (``plural`` for irregulars)."""
    shown = f"{number:g}" if isinstance(number, float) else str(number)
    return f"{shown} {thing if number == 1 else plural or thing + 's'}"


def as_option(name: str | None) -> str:
    """`` --as NAME`` (shell-quoted) for a command suggested to someone who ran theirs with
    ``--as NAME``, so that running it acts as the same person; empty without a name."""
    return "" if name is None else f" --as {shlex.quote(name)}"
