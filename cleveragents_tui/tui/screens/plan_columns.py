"""Which columns the plan list shows, and how wide the action may be, for the table's width:
the list never scrolls sideways (at 80 columns its last three columns were off screen).

The table narrows in steps, the least useful first — the year off the date, then the
profile, the attempt, a shorter "decisions" heading, the date — and after the year, before
each step, the action (the widest column) is elided down to :data:`ACTION_MIN`. At 120
columns every column of the demo shows. The action's column takes whatever width the others
leave: the columns fill the table (no empty strip on its right).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

COLUMNS = ("plan", "action", "phase", "state", "att", "profile", "decisions", "appr", "updated")
LONG_DATE, SHORT_DATE = "%Y-%m-%d %H:%M", "%m-%d %H:%M"
DATE_WIDTH = {LONG_DATE: 16, SHORT_DATE: 11}
ACTION_MIN = 16  # elided down to this before a column goes
ACTION_FLOOR = 8  # and below it only when nothing else can go
PADDING = 2  # a DataTable cell's padding, both sides


@dataclass(frozen=True)
class Fit:
    columns: tuple[str, ...]
    labels: Mapping[str, str]
    date_format: str
    action_width: int | None  # the action's cell, elided or padded to it; None: its own

    def width(self, content: Mapping[str, int], action: int | None = None) -> int:
        """The table's width with these columns, the action ``action`` wide (else its own)."""
        total = 0
        for column in self.columns:
            if column == "updated":
                cell = DATE_WIDTH[self.date_format]
            elif column == "action" and action is not None:
                cell = action
            else:
                cell = content.get(column, 0)
            total += max(cell, len(self.labels[column])) + PADDING
        return total


def _steps(fit: Fit) -> list[Fit]:
    """``fit`` narrowed one step at a time, the least useful first."""
    out = [replace(fit, date_format=SHORT_DATE)]
    for dropped in ("profile", "att"):
        out.append(replace(out[-1], columns=tuple(c for c in out[-1].columns if c != dropped)))
    out.append(replace(out[-1], labels={**out[-1].labels, "decisions": "dec"}))
    out.append(replace(out[-1], columns=tuple(c for c in out[-1].columns if c != "updated")))
    return out


def fit_columns(content: Mapping[str, int], available: int) -> Fit:
    """The widest layout that fits ``available`` cells, its action as wide as the other
    columns leave; ``content``: each column's widest cell (the dates aside: their formats
    have a fixed width)."""
    whole = Fit(COLUMNS, {c: c for c in COLUMNS}, LONG_DATE, None)
    for fit in (whole, *_steps(whole)):
        others = fit.width(content, action=0) - len("action") - PADDING
        rest = available - others - PADDING  # what the action's cell may take
        if fit.width(content) <= available:
            return replace(fit, action_width=rest)
        if fit.date_format == LONG_DATE:
            continue  # the year goes before any of the action
        if rest >= ACTION_MIN:
            return replace(fit, action_width=rest)
    return replace(fit, action_width=max(rest, ACTION_FLOOR))
