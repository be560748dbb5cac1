"""What the system is doing right now: the plan's state, what its run in this app waits on
(a model's reply, a tool call) and for how long, and its last events."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.widgets import Static

from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.read.tui_queries import EventView
from cleveragents_tui.tui.render import safe_text
from cleveragents_tui.views.lines import one_line
from cleveragents_tui.views.plan import line_rich, plan_heading
from cleveragents_tui.views.progress import event_line, plan_wait_text


def _event_line(event: EventView) -> str:
    """One line: the time, then the event as the progress lines word it, and who."""
    return f"{event.created_at:%H:%M:%S} {event_line(event, by=True)}"


def _folded(heading: Text, width: int) -> Text:
    """``heading`` broken after a `` · `` wherever its next part would not fit in ``width``
    cells: a part (``profile auto``) moves whole to the next row, rather than Rich folding
    it at its space; a part wider than the bar alone is still folded by Rich."""
    if width <= 0 or heading.cell_len <= width:
        return heading
    out = Text()
    column = 0
    for part in heading.split(_SEPARATOR, include_separator=True, allow_blank=False):
        # with its " ·" (its trailing space may overhang): a part whose words fit and whose
        # "·" did not left the "·" alone on the next row
        shown = part.cell_len - (1 if part.plain.endswith(_SEPARATOR) else 0)
        if column and column + shown > width:
            out.rstrip()
            out.append("\n")
            column = 0
        out.append_text(part)
        column += part.cell_len
    return out


_SEPARATOR = " · "
LAST_MIN = 70  # the "last:" line's least length, without its "last: "
WAIT_TICK = 1.0  # seconds between two readings of what the run waits on


class PlanStatus(Static):
    DEFAULT_CSS = """
    PlanStatus { height: auto; max-height: 6; padding: 0 1; background: $boost; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self._wait = ""  # "waiting for openai:gpt-4o-mini · 12 s", or nothing

    def on_mount(self) -> None:
        self.set_interval(WAIT_TICK, self._read_wait)

    def _read_wait(self) -> None:
        """What this plan's run waits on now: nothing is recorded while a model thinks or a
        test command runs, so without it the bar would stand still for minutes. The runner
        names its waits in memory (engine/core/in_flight.py): no store is read here."""
        if self._shown is None:
            return
        said = plan_wait_text(self._shown[0].plan_id)  # its child plans' waits too
        if said != self._wait:
            self._wait = said
            self.show(*self._shown[:3], goes_on=self._shown[3])

    def show(
        self, plan: Plan, pending: list[Approval], events: list[EventView], *, goes_on: bool
    ) -> None:
        """``goes_on``: the plan waits with nothing left to answer, and `R` takes it on."""
        self._shown = (plan, pending, events, goes_on)  # shown again at another width
        t = line_rich(plan_heading(plan), one_row=False)  # the whole heading, folded
        if pending:
            t.append(
                f"{_SEPARATOR}{counted(len(pending), 'approval')} pending", style="bold yellow"
            )
        elif goes_on:
            t.append(f"{_SEPARATOR}nothing left to answer: R goes on", style="bold yellow")
        t = _folded(t, self.content_size.width)
        if self._wait:
            t.append("\nnow: ", style="bold")
            t.append(f"⋯ {self._wait}", style="bold cyan")
        for approval in pending:
            if approval.kind is ApprovalKind.RECONCILE:
                t.append("\n⚠ ", style="bold red")
                t.append(one_line(approval.question, 300), style="bold")
                t.append(" — answer it in Approvals (a)", style="italic")
        if events:
            t.append("\nlast: ", style="bold")
            # one row wide: cut at the bar's width, not at 70 cells in a 200-column window
            # (the bar spans the screen: its width less the padding, before it is laid out)
            width = self.content_size.width or self.app.size.width - 2
            t.append(one_line(_event_line(events[0]), max(LAST_MIN, width - 6)), style="dim")
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

    def on_resize(self, _event: events.Resize) -> None:
        """The heading folded again for the new width."""
        if self._shown is not None:
            plan, pending, shown_events, goes_on = self._shown
            self.show(plan, pending, shown_events, goes_on=goes_on)

    plain_text: str = ""
    _lines: tuple[str, ...] = ()
    _shown: tuple[Plan, list[Approval], list[EventView], bool] | None = None
