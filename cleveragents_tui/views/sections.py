"""Sections of a read model as plain data, and their plain-text rendering.

A view is a tuple of :class:`Section` s; each is an optional title over :class:`Row` s of
``(label, value, emphasis)``. The plain text and the Rich text (:mod:`.rich_text`) are the
same characters — the Rich one adds styles — so what the CLI prints is what the app shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cleveragents_tui.domain.display import printable

# What a value means to the reader; the Rich renderer styles it, plain text carries it in
# the value's own words and marks (⚠ ✗ ↻ ⚑).
Emphasis = Literal["plain", "heading", "strong", "dim", "good", "bad", "warn", "accent"]

INDENT = "  "  # rows under a titled section


@dataclass(frozen=True, slots=True)
class Row:
    """One line: ``label`` (may be empty: the value stands alone) and its ``value``."""

    label: str
    value: str
    emphasis: Emphasis = "plain"


@dataclass(frozen=True, slots=True)
class Section:
    """A title (None: rows at the left margin, no heading) over its rows."""

    title: str | None
    rows: tuple[Row, ...]


View = tuple[Section, ...]


def filled(value: str | None) -> str:
    """``value``, or ``-`` when there is none (an empty field still shows its label)."""
    return value if value not in (None, "") else "-"


def label_width(section: Section) -> int:
    """The label column of ``section``: its longest label and two spaces."""
    return max((len(r.label) + 2 for r in section.rows if r.label), default=0)


def row_parts(section: Section, row: Row) -> tuple[str, str, str]:
    """``(lead, label cell, value)`` of ``row``: the indent, the padded label, and the value
    with every later line indented under the first (a multi-line rationale stays in its
    column)."""
    lead = INDENT if section.title is not None else ""
    cell = row.label.ljust(label_width(section)) if row.label else ""
    value = row.value.replace("\n", "\n" + " " * (len(lead) + len(cell)))
    return lead, cell, value


def to_plain_text(view: View) -> str:
    """``view`` as the terminal shows it: sections apart by a blank line, control
    characters escaped."""
    blocks = []
    for section in view:
        lines = [] if section.title is None else [section.title]
        lines += ["".join(row_parts(section, row)) for row in section.rows]
        blocks.append("\n".join(lines))
    return printable("\n\n".join(blocks))
