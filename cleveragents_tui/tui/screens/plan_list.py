"""All plans: phase, state, attempt, profile, decisions, pending approvals; child plans
nested under their parent; filter and sort."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Header, Input, Static

from cleveragents_tui.domain.views import PlanSummary
from cleveragents_tui.engine import list_plans
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import LoadFailed, PlansLoaded
from cleveragents_tui.tui.render import safe_text, state_text
from cleveragents_tui.tui.screens.base import ListScreen
from cleveragents_tui.tui.services import services
from cleveragents_tui.tui.widgets.keys_footer import KeysFooter

SORTS = ("tree", "updated", "state", "action", "approvals")


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
        self.shown: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="/ filter plans (id, action, state, phase, profile)", id="filter")
        yield Static("", id="plans-caption", markup=False)
        yield DataTable(id="plans", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "cleveragents · plans"
        table = self.query_one(DataTable)
        table.add_columns(
            "plan", "action", "phase", "state", "att", "profile", "decisions", "appr", "updated"
        )
        self.refresh_data()
        table.focus()

    def read(self, store: Store) -> PlansLoaded:
        return PlansLoaded(list_plans(store))

    def on_plans_loaded(self, message: PlansLoaded) -> None:
        self.summaries = message.summaries
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
        table.clear()
        self.shown = []
        for block in blocks:
            for s in block:
                p = s.plan
                indent = "  " * s.depth + ("└ " if s.depth else "")
                approvals = Text(
                    str(s.pending_approvals), style="bold yellow" if s.pending_approvals else "dim"
                )
                table.add_row(
                    Text(p.plan_id[:10], style="dim"),
                    safe_text(indent + p.action, one_line=True),
                    p.phase.value,
                    state_text(p.state.value),
                    str(p.attempt),
                    safe_text(p.automation_profile, one_line=True),
                    f"{s.current_decision_count}/{s.decision_count}",
                    approvals,
                    p.updated_at.strftime("%Y-%m-%d %H:%M"),
                    key=p.plan_id,
                )
                self.shown.append(p.plan_id)
        total = len(self.summaries)
        caption = f"{len(self.shown)} of {total} plans · sort: {self.sort} (o)"
        if not total:
            caption = "No plans yet. Run `agents demo` or `agents plan use ACTION`."
        self.query_one("#plans-caption", Static).update(caption)
        if keep in self.shown:
            table.move_cursor(row=self.shown.index(keep), animate=False)

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
