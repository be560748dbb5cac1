"""The queue of pending human decisions: approve or deny, with a reason, recorded with who
and when."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Header, Static

from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine import answer_approval, pending_approvals
from cleveragents_tui.engine.run.approvals import ready_to_go_on
from cleveragents_tui.engine.run.children import run_from
from cleveragents_tui.engine.run.denial import Denial, denial_of
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import ApprovalsLoaded, LoadFailed
from cleveragents_tui.tui.modals.reason import ReasonModal
from cleveragents_tui.tui.render import safe_text
from cleveragents_tui.tui.screens.after_denial import AfterDenial
from cleveragents_tui.tui.screens.base import ListScreen
from cleveragents_tui.tui.services import services
from cleveragents_tui.tui.widgets.keys_footer import KeysFooter
from cleveragents_tui.views.lines import readable


class ApprovalsScreen(ListScreen, AfterDenial):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="approvals.back"),
        Binding("y", "answer(True)", "Approve", id="approvals.approve"),
        Binding("n", "answer(False)", "Deny", id="approvals.deny"),
        Binding("enter", "open_plan", "Open plan", id="approvals.open"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.approvals: list[Approval] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="approvals-caption", markup=False)
        yield DataTable(id="approvals", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="approval-detail-box"):
            yield Static("", id="approval-detail", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "approvals"
        self.query_one(DataTable).add_columns("kind", "plan", "question", "requested")
        # no refresh_data() here: the ScreenResume that follows every push loads the queue
        self.query_one(DataTable).focus()

    def read(self, store: Store) -> ApprovalsLoaded:
        pending = pending_approvals(store)
        return ApprovalsLoaded(pending, ready_to_go_on(store))

    def on_load_failed(self, message: LoadFailed) -> None:
        self.notify(message.error, title="Cannot list the approvals", severity="error")

    def on_approvals_loaded(self, message: ApprovalsLoaded) -> None:
        keep = self._selected()
        self.approvals = message.approvals
        table = self.query_one(DataTable)
        table.clear()
        for a in self.approvals:
            table.add_row(
                Text(a.kind.value, style="bold yellow"),
                Text(a.plan_id[:10], style="dim"),
                safe_text(a.question, one_line=True),
                a.requested_at.strftime("%Y-%m-%d %H:%M"),
                key=a.approval_id,
            )
        n = len(self.approvals)
        ready = "".join(f"\n  {p.plan_id[:10]}  {p.action}" for p in message.ready)
        if ready:
            ready = (
                "\nThese plans wait with nothing left to answer: open one from the plan list"
                f" and press R to go on.{ready}"
            )
        asked = (
            f"{n} pending · y approve · n deny · answered as {services(self).user}"
            if n
            else "Nothing waits for you."
        )  # names from the store: escaped
        self.query_one("#approvals-caption", Static).update(safe_text(f"{asked}{ready}"))
        ids = [a.approval_id for a in self.approvals]
        if keep is not None and keep.approval_id in ids:
            table.move_cursor(row=ids.index(keep.approval_id), animate=False)
        self._show_detail()

    def _selected(self) -> Approval | None:
        row = self.query_one(DataTable).cursor_row
        return self.approvals[row] if 0 <= row < len(self.approvals) else None

    def _show_detail(self) -> None:
        a = self._selected()
        text = Text()
        if a is not None:  # the question in full: the table's column cuts a long one
            text.append(f"{a.question}\n", style="bold")
            text.append(f"{a.approval_id} · plan {a.plan_id}\n", style="dim")
            for k, v in a.details.items():
                if k == "key":  # the engine's own name of the question, not for a person
                    continue
                text.append(f"{k.replace('_', ' ')}: ", style="bold")
                text.append(f"{readable(v, 300)}\n")
        text.rstrip()  # no empty row under the last line
        self.query_one("#approval-detail", Static).update(safe_text(text))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._show_detail()

    @work(exclusive=True, group="answer", exit_on_error=False)
    async def action_answer(self, approve: bool) -> None:
        a = self._selected()
        if a is None:
            return
        verb = "Approve" if approve else "Deny"
        reason = await self.app.push_screen_wait(ReasonModal(f"{verb}: {a.question}"))
        if reason is None:
            return
        store, user = services(self).store, services(self).user
        try:  # the engine works in a thread: the event loop never waits on it
            answered = await asyncio.to_thread(
                answer_approval,
                store,
                a.approval_id,
                approve=approve,
                by=user,
                reason=reason or None,
            )
            denial = None if approve else await asyncio.to_thread(denial_of, store, answered)
            go_on = await asyncio.to_thread(run_from, store, answered.plan_id)
        except UserError as exc:
            self.notify(str(exc), severity="error")
            self.refresh_data()
            return
        self.refresh_data()
        if denial is None or not denial.choices:
            # a child plan's question: its parent's run goes on with it
            then = (
                "lands it on the real resources"
                if approve and a.kind is ApprovalKind.APPLY_GATE
                else "continues it"
            )
            self.notify(f"{verb.lower()}d as {user}; R on plan {go_on[:10]} {then}")
            return
        await self.offer_choices(denial)

    def on_correct_chosen(self, denial: Denial) -> None:
        super().on_correct_chosen(denial)
        services(self).open_plan(denial.plan.plan_id)

    def action_open_plan(self) -> None:
        a = self._selected()
        if a is not None:
            services(self).open_plan(a.plan_id)

    def on_data_table_row_selected(self, _: DataTable.RowSelected) -> None:
        self.action_open_plan()
