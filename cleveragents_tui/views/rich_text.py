"""A view as ``rich.text.Text`` for the app: the characters :func:`to_plain_text` prints,
styled by each row's emphasis; built from text, never markup (engine and user text may hold
``[`` and ``]``), every control character escaped."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cleveragents_tui.domain.display import printable
from cleveragents_tui.views.sections import Emphasis, Row, Section, View, row_parts

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


def to_rich_columns(view: View) -> Group:
    """``view`` styled as :func:`to_rich`, each section's values in a column of their own: a
    value too long for a narrow panel wraps under itself, not under the labels."""
    parts: list[RenderableType] = []
    for n, section in enumerate(view):
        if n:
            parts.append(Text(""))
        if section.title is not None:
            parts.append(Text(printable(section.title), style="bold"))
        labelled: list[Row] = []
        for row in (*section.rows, None):
            if row is not None and row.label:
                labelled.append(row)
                continue
            if labelled:
                parts.append(_grid(section, labelled))
                labelled = []
            if row is not None:  # a value standing alone starts at the margin
                lead, _, value = row_parts(section, row)
                parts.append(Text(lead + printable(value), style=STYLES[row.emphasis]))
    return Group(*parts)


def _grid(section: Section, rows: list[Row]) -> Table:
    """Labelled ``rows`` of ``section``: the indent and label cell, then the value."""
    grid = Table.grid()
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for row in rows:
        lead, cell, _ = row_parts(section, row)
        value = Text(printable(row.value), style=STYLES[row.emphasis])
        grid.add_row(Text(lead + printable(cell), style="bold"), value)
    return grid
