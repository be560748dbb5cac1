"""Counts in messages people read: ``1 warning``, ``3 warnings``, never ``3 warning(s)``."""

from __future__ import annotations


def counted(number: float, thing: str, plural: str | None = None) -> str:
    """``number`` and ``thing``, plural unless the number is one (``plural`` for irregulars)."""
    shown = f"{number:g}" if isinstance(number, float) else str(number)
    return f"{shown} {thing if number == 1 else plural or thing + 's'}"
