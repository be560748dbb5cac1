"""One-line helpers for decisions and plans, shared by every view, the CLI and the app."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui.domain.display import printable

if TYPE_CHECKING:
    from cleveragents_tui.domain.decision import Decision
    from cleveragents_tui.domain.views import TreeRow

MAX_OPTION = 72


def one_line(text: str, limit: int = MAX_OPTION) -> str:
    """``text`` on one line (runs of whitespace joined, controls escaped), cut to ``limit``
    characters with ``…``: a chosen option or a question inside a line."""
    first = printable(" ".join(text.split()), one_line=True)
    return first if len(first) <= limit else first[: limit - 1] + "…"


def readable(value: object, limit: int = 120) -> str:
    """A stored value (event payloads, approval details) as a person reads it: a list as
    items joined by commas, a mapping as ``key value`` pairs, never a Python repr."""
    if isinstance(value, dict):
        text = ", ".join(f"{k} {readable(v, limit)}" for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        text = ", ".join(readable(v, limit) for v in value) or "none"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return one_line(text, limit)


def decision_ref(decision: Decision) -> str:
    """``01J…  strategy_choice: A plain function…``: a decision named in another's view."""
    return f"{decision.decision_id}  {decision.decision_type.value}: {one_line(decision.chosen_option)}"


def row_ref(row: TreeRow) -> str:
    """:func:`decision_ref` of a tree row."""
    return f"{row.decision_id}  {row.decision_type}: {one_line(row.chosen_option)}"
