"""What the system is doing right now: the plan's state and its last events."""

from __future__ import annotations

from rich.cells import cell_len
from textual.widgets import Static

from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.read.tui_queries import EventView
from cleveragents_tui.tui.render import readable, safe_text
from cleveragents_tui.views.lines import one_line
from cleveragents_tui.views.plan import line_rich, plan_heading


def _event_line(event: EventView) -> str:
    """One line: the time, the event, who, and its first three fields in words."""
    detail = "; ".join(f"{k} {readable(v, 40)}" for k, v in list(event.payload.items())[:3])
    who = f" by {event.actor}" if event.actor else ""
    return f"{event.created_at:%H:%M:%S} {event.kind}{who}" + (f" ({detail})" if detail else "")


class PlanStatus(Static):
    DEFAULT_CSS = """
    PlanStatus { height: auto; max-height: 6; padding: 0 1; background: $boost; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)

    def show(self, plan: Plan, pending: list[Approval], events: list[EventView]) -> None:
        t = line_rich(plan_heading(plan), one_row=False)  # the whole heading, folded
        if pending:
            t.append(f" · {len(pending)} approval(s) pending", style="bold yellow")
        for approval in pending:
            if approval.kind is ApprovalKind.RECONCILE:
                t.append("\n⚠ ", style="bold red")
                t.append(one_line(approval.question, 300), style="bold")
                t.append(" — answer it in Approvals (a)", style="italic")
        if events:
            t.append("\nnow: ", style="bold")
            t.append(one_line(_event_line(events[0]), 70), style="dim")
        t = safe_text(t)
        # A layout of the whole screen costs the loop ~40 ms at 120x40 (10 ms of the poll's
        # 13): only when the bar's height may change — other lines, or a line too long to
        # stay on one row.
        width = self.content_size.width
        fits = all(cell_len(line) <= width for line in (*t.plain.split("\n"), *self._lines))
        same_rows = t.plain.count("\n") == self.plain_text.count("\n")
        self.update(t, layout=not (self.plain_text and same_rows and fits))
        self.plain_text = t.plain
        self._lines = tuple(t.plain.split("\n"))

    plain_text: str = ""
    _lines: tuple[str, ...] = ()
