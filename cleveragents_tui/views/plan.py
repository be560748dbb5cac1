"""A plan's heading and a decision's tree line, for ``agents plan tree`` (and the other
commands that head with the plan) and the app's status bar and tree: the same characters in
both, as spans of text with an emphasis (:func:`line_text` prints them, :func:`line_rich`
styles them).

What each adds around the line is its own: the CLI puts the decision id and the guides
(``├──``) before it; the app's tree draws its guides, and puts the phase's coloured letter
(S, E, A) first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui.domain.display import printable
from cleveragents_tui.views.lines import MAX_OPTION, one_line
from cleveragents_tui.views.sections import Emphasis

if TYPE_CHECKING:  # neither the engine nor Rich is imported when the CLI starts
    from rich.text import Text

    from cleveragents_tui.domain.plan import Plan
    from cleveragents_tui.domain.views import TreeRow

SUPERSEDED = "✗ "
CORRECTION = "↻ "
CHECKPOINT = "  ⚑"

Span = tuple[str, Emphasis]
Line = tuple[Span, ...]

STATE_EMPHASIS: dict[str, Emphasis] = {
    "running": "good",
    "awaiting_approval": "warn",
    "paused": "warn",
    "completed": "good",
    "applied": "accent",
    "cancelled": "dim",
    "errored": "bad",
    "constrained": "bad",
}


def plan_heading(plan: Plan) -> Line:
    """``demo/add-greeting · execute · awaiting_approval · attempt 1 · profile auto · plan
    01J…``: what the plan does first (the id is cut first in a narrow window)."""
    state = plan.state.value
    return (
        (plan.action, "strong"),
        (f" · {plan.phase.value} · ", "plain"),
        (state, STATE_EMPHASIS.get(state, "plain")),
        (f" · attempt {plan.attempt} · profile {plan.automation_profile}", "plain"),
        (f" · plan {plan.plan_id}", "dim"),
    )


def tree_line(row: TreeRow, checkpoint: bool, option_limit: int = MAX_OPTION) -> Line:
    """``↻ strategy_choice: An async handler  (0.80)  ⚑``, and ``[superseded by 01J…]`` on a
    superseded decision; ``option_limit`` cuts the chosen option (the app's column is
    narrower than a terminal line)."""
    superseded = row.superseded_by is not None
    spans: list[Span] = []
    if superseded:
        spans.append((SUPERSEDED, "bad"))
    elif row.is_correction:
        spans.append((CORRECTION, "accent"))
    spans.append((f"{row.decision_type}: ", "dim" if superseded else "strong"))
    spans.append((one_line(row.chosen_option, option_limit), "dim" if superseded else "plain"))
    if row.confidence_score is not None:
        spans.append((f"  ({row.confidence_score:.2f})", "dim"))
    if checkpoint:
        spans.append((CHECKPOINT, "accent"))
    if superseded:
        spans.append((f"  [superseded by {row.superseded_by}]", "dim"))
    return tuple(spans)


def line_text(line: Line) -> str:
    """``line`` on one line of plain text, control characters escaped."""
    return "".join(printable(text, one_line=True) for text, _ in line)


def line_rich(line: Line, *, one_row: bool = True) -> Text:
    """``line`` styled by each span's emphasis: the characters :func:`line_text` gives; cut
    with ``…`` at the edge, or (``one_row=False``) folded onto the next row."""
    from rich.text import Text

    from cleveragents_tui.views.rich_text import STYLES

    out = Text(no_wrap=one_row, overflow="ellipsis" if one_row else "fold")
    for text, emphasis in line:
        out.append(printable(text, one_line=True), style=STYLES[emphasis])
    return out
