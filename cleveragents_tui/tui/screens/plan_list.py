"""All plans: phase, state, attempt, profile, decisions, pending approvals; child plans
nested under their parent; filter and sort."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.widgets import DataTable, Header, Input, Static

from cleveragents_tui.domain.views import PlanSummary
from cleveragents_tui.engine import list_plans
from cleveragents_tui.engine.run.approvals import ready_to_go_on
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import LoadFailed, PlansLoaded
from cleveragents_tui.tui.render import safe_text, state_text
from cleveragents_tui.tui.screens.base import ListScreen
from cleveragents_tui.tui.screens.plan_columns import COLUMNS, Fit, fit_columns
from cleveragents_tui.tui.services import services
from cleveragents_tui.tui.widgets.keys_footer import KeysFooter

SORTS = ("tree", "updated", "state", "action", "approvals")
CELLS = tuple(c for c in COLUMNS if c != "updated")  # the date's width: its format's


def _blocks(summaries: list[PlanSummary]) -> list[list[PlanSummary]]:
    """Each top-level plan with its descendants (list_plans returns them depth-first)."""
    blocks: list[list[PlanSummary]] = []
    for s in summaries:
        if s.depth == 0 or not blocks:
            blocks.append([s])
        else:
            blocks[-1].append(s)
    return blocks


def _matches(s: PlanSummary, needle: str) -> bool:
    p = s.plan
    hay = " ".join(
        [p.plan_id, p.action, p.title or "", p.phase.value, p.state.value, p.automation_profile]
    )
    return needle.lower() in hay.lower()


def _cells(s: PlanSummary, ready: bool) -> dict[str, Text]:
    """A plan's row, by column (the date's format depends on the width: set when shown);
    ``ready``: it waits with nothing left to answer, so its approvals read ``0 R``."""
    p = s.plan
    indent = "  " * s.depth + ("└ " if s.depth else "")
    return {
        "plan": Text(p.plan_id[:10], style="dim"),
        "action": safe_text(indent + p.action, one_line=True),
        "phase": Text(p.phase.value),
        "state": state_text(p.state.value),
        "att": Text(str(p.attempt)),
        "profile": safe_text(p.automation_profile, one_line=True),
        "decisions": Text(f"{s.current_decision_count}/{s.decision_count}"),
        "appr": Text(
            f"{s.pending_approvals} R" if ready else str(s.pending_approvals),
            style="bold yellow" if s.pending_approvals or ready else "dim",
        ),
    }


class PlanListScreen(ListScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_plan", "Open", id="plans.open", show=True),
        Binding("slash", "focus_filter", "Filter", id="plans.filter"),
        Binding("o", "cycle_sort", "Sort", id="plans.sort"),
        Binding("escape", "clear_filter", "Clear filter", id="plans.clear", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort = "tree"
        self.summaries: list[PlanSummary] = []
        self.ready: set[str] = set()
        self.shown: list[str] = []
        self.fit: Fit | None = None  # the columns shown, for the table's width

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="/ filter plans (id, action, state, phase, profile)", id="filter")
        yield Static("", id="plans-caption", markup=False)
        yield DataTable(id="plans", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "cleveragents · plans"
        self.refresh_data()
        self.query_one(DataTable).focus()

    def on_resize(self, _: Resize) -> None:
        self.call_after_refresh(self._render_rows)  # the columns fit the new width

    def read(self, store: Store) -> PlansLoaded:
        return PlansLoaded(list_plans(store), {p.plan_id for p in ready_to_go_on(store)})

    def on_plans_loaded(self, message: PlansLoaded) -> None:
        self.summaries = message.summaries
        self.ready = message.ready
        self._render_rows()

    def on_load_failed(self, message: LoadFailed) -> None:
        self.notify(message.error, title="Cannot list the plans", severity="error", timeout=10)

    def _render_rows(self) -> None:
        table = self.query_one(DataTable)
        keep = self.selected_plan_id
        needle = self.query_one("#filter", Input).value.strip()
        blocks = [
            b for b in _blocks(self.summaries) if not needle or any(_matches(s, needle) for s in b)
        ]
        key = {
            "tree": lambda b: b[0].plan.created_at.timestamp(),
            "updated": lambda b: -max(s.plan.updated_at.timestamp() for s in b),
            "state": lambda b: b[0].plan.state.value,
            "action": lambda b: b[0].plan.action.lower(),
            "approvals": lambda b: -sum(s.pending_approvals for s in b),
        }[self.sort]
        blocks.sort(key=key)
        rows = [(s, _cells(s, s.plan.plan_id in self.ready)) for block in blocks for s in block]
        widths = {c: max((cells[c].cell_len for _, cells in rows), default=0) for c in CELLS}
        fit = fit_columns(widths, self._available(len(rows)))
        if fit != self.fit:
            self.fit = fit
            table.clear(columns=True)
            for column in fit.columns:
                width = fit.action_width if column == "action" else None
                table.add_column(fit.labels[column], key=column, width=width)
        table.clear()
        self.shown = []
        for s, cells in rows:
            cells["updated"] = Text(s.plan.updated_at.strftime(fit.date_format))
            if fit.action_width is not None:
                cells["action"].truncate(fit.action_width, overflow="ellipsis")
            table.add_row(*(cells[c] for c in fit.columns), key=s.plan.plan_id)
            self.shown.append(s.plan.plan_id)
        total = len(self.summaries)
        caption = f"{len(self.shown)} of {total} plans · sort: {self.sort} (o)"
        if self.ready:  # `0 R` in their approvals column
            caption += f" · {len(self.ready)} with nothing left to answer: open, press R"
        if not total:
            caption = "No plans yet. Run `agents demo` or `agents plan use ACTION`."
        self.query_one("#plans-caption", Static).update(caption)
        if keep in self.shown:
            table.move_cursor(row=self.shown.index(keep), animate=False)

    def _available(self, rows: int) -> int:
        """The cells' width: the table's, less its scrollbar when the rows overflow it."""
        table = self.query_one(DataTable)
        width = table.size.width or self.app.size.width
        if rows + 1 > table.size.height:  # the heading, then the rows
            width -= table.styles.scrollbar_size_vertical
        return width

    @property
    def selected_plan_id(self) -> str | None:
        table = self.query_one(DataTable)
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def on_input_changed(self, _: Input.Changed) -> None:
        self._render_rows()

    def on_input_submitted(self, _: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            services(self).open_plan(event.row_key.value)

    def action_open_plan(self) -> None:
        plan_id = self.selected_plan_id
        if plan_id:
            services(self).open_plan(plan_id)

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", Input).value = ""
        self.query_one(DataTable).focus()

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._render_rows()
