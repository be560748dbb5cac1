"""Engine read models rendered as ``rich.text.Text`` (never markup: engine and user text may
contain ``[`` and ``]``), with every control character shown escaped (:func:`safe_text`):
Textual passes ``ESC`` through to the terminal, so a decision's text could otherwise set
the window title or write the clipboard. The views the CLI shows too (a decision's details,
the impact preview, the diff's heading, the plan heading, a tree line) are rendered by
cleveragents_tui/views."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.views.plan import line_rich, tree_line

# characters of a chosen option in a tree label as built: the tree shows more where its pane
# has room, and fewer (not below TREE_OPTION_AT_LEAST) where the numbers and the ⚑ after it
# would run past the pane's edge
TREE_OPTION = 30
TREE_OPTION_AT_LEAST = 12

STATE_STYLE = {
    "running": "bold green",
    "awaiting_approval": "bold yellow",
    "paused": "yellow",
    "completed": "green",
    "applied": "bold blue",
    "cancelled": "dim",
    "errored": "bold red",
    "constrained": "red",
    "created": "",
}


PHASE_STYLE = {"strategize": "blue", "execute": "magenta", "apply": "green"}


def safe_text(text: Text | str, *, one_line: bool = False) -> Text:
    """``text`` with its control characters escaped (:func:`printable`) and its styles kept:
    what every widget that shows a user's, an agent's or a file's text is given."""
    if isinstance(text, str):
        return Text(printable(text, one_line=one_line))
    cuts = sorted({0, len(text), *(o for span in text.spans for o in (span.start, span.end))})
    out = text.blank_copy()
    for piece in text.divide(cuts):  # each piece lies wholly inside or outside each span
        start = len(out)
        out.append(printable(piece.plain, one_line=one_line))
        for span in piece.spans:
            out.stylize(span.style, start, len(out))
    return out


def short(ulid: str | None, n: int = 10) -> str:
    return ulid[:n] if ulid else "-"


def state_text(state: str) -> Text:
    return Text(state, style=STATE_STYLE.get(state, ""))


AFFECTED_STYLE = Style.parse("reverse yellow")  # a tree row a correction would affect


def tree_label(row: TreeRow, checkpoint: bool, option_limit: int = TREE_OPTION) -> Text:
    """The phase's coloured letter, then the line ``agents plan tree`` prints for the
    decision (cleveragents_tui/views/plan.py), its chosen option cut to ``option_limit``
    characters (the tree widens it to the room it has when it draws the row, and adds
    :data:`AFFECTED_STYLE` to an affected one)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{row.phase[:1].upper()} ", style=PHASE_STYLE.get(row.phase, "dim"))
    t.append_text(line_rich(tree_line(row, checkpoint, option_limit=option_limit)))
    return t
