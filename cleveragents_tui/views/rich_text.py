"""A view as ``rich.text.Text`` for the app: the characters :func:`to_plain_text` prints,
styled by each row's emphasis; built from text, never markup (engine and user text may hold
``[`` and ``]``), every control character escaped."""

from __future__ import annotations

from rich.text import Text

from cleveragents_tui.domain.display import printable
from cleveragents_tui.views.sections import Emphasis, View, row_parts

STYLES: dict[Emphasis, str] = {
    "plain": "",
    "heading": "bold underline",
    "strong": "bold",
    "dim": "dim",
    "good": "green",
    "bad": "bold red",
    "warn": "yellow",
    "accent": "cyan",
}


def to_rich(view: View) -> Text:
    """``view`` styled: titles and labels bold, values by their emphasis."""
    t = Text()
    for n, section in enumerate(view):
        if n:
            t.append("\n\n")
        if section.title is not None:
            t.append(printable(section.title), style="bold")
            if section.rows:
                t.append("\n")
        for m, row in enumerate(section.rows):
            lead, cell, value = row_parts(section, row)
            t.append(lead + printable(cell), style="bold")
            t.append(printable(value), style=STYLES[row.emphasis])
            if m < len(section.rows) - 1:
                t.append("\n")
    return t
