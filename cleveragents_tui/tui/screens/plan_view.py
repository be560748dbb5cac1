"""One plan: its decision tree beside the selected decision's details, what it is doing
now, and the controls (correct, diff, pause / cancel / resume / apply)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Header, Tree
from textual.worker import Worker, WorkerState

from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine import Impact, explain_decision
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.correct.preview import preview, replay_blocker
from cleveragents_tui.engine.correct.strategy import (
    editable_strategy_decision,
    preview_strategy_edit,
)
from cleveragents_tui.engine.read import tui_queries
from cleveragents_tui.engine.run.denial import Denial
from cleveragents_tui.tui.messages import (
    DecisionFailed,
    DecisionLoaded,
    LoadFailed,
    PlanData,
    PlanDataLoaded,
    StoreChanged,
)
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal, impact_text
from cleveragents_tui.tui.modals.outside import OutsideChangesModal
from cleveragents_tui.tui.modals.reason import ReasonModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.modals.strategy import StrategyDialog
from cleveragents_tui.tui.screens.plan_controls import PlanControls
from cleveragents_tui.tui.screens.plan_data import read_plan_data
from cleveragents_tui.tui.screens.plan_export import PlanExport
from cleveragents_tui.tui.screens.plan_history import PlanHistory
from cleveragents_tui.tui.screens.plan_settings import PlanSettings
from cleveragents_tui.tui.services import services
from cleveragents_tui.tui.widgets.decision_detail import DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import MORE, DecisionTree, TreeIndex
from cleveragents_tui.tui.widgets.keys_footer import KeysFooter
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from cleveragents_tui.tui.widgets.working import Working
from cleveragents_tui.views.lines import one_line

FINISHED = (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED)


class PlanScreen(PlanExport, PlanControls, PlanSettings, PlanHistory):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.leave_plan", "Back", id="plan.back"),
        Binding("c", "correct", "Correct", id="plan.correct"),
        Binding("e", "edit_strategy", "Edit strategy", id="plan.edit_strategy"),
        Binding("d", "diff", "Diff", id="plan.diff"),
        Binding("C", "corrections", "Corrections", id="plan.corrections", show=False),
        Binding("s", "toggle_superseded", "Superseded", id="plan.superseded"),
        Binding("u", "goto_parent", "Parent", id="plan.parent"),
        Binding("n", "goto_next_sibling", "Next sibling", id="plan.next_sibling"),
        Binding("o", "goto_replaced", "Old/new", id="plan.replaced"),
        Binding("P", "pause", "Pause", id="plan.pause", show=False),
        Binding("X", "cancel_plan", "Cancel plan", id="plan.cancel", show=False),
        Binding("R", "resume", "Resume/retry", id="plan.resume", show=False),
        Binding("A", "apply", "Apply", id="plan.apply", show=False),
        Binding("p", "set_profile", "Set profile", id="plan.profile", show=False),
        Binding("m", "set_model", "Set model", id="plan.model", show=False),
        Binding("x", "export", "Export", id="plan.export"),
        Binding("slash", "search", "Search", id="plan.search"),
        Binding("j", "open_child", "Open child plan", id="plan.child", show=False),
        Binding("y", "copy_id", "Copy id", id="plan.copy_id", show=False),
    ]

    def __init__(self, plan_id: str) -> None:
        super().__init__(plan_id)
        self._warned: set[str] = set()  # reconcile approvals already notified
        self._last_search = ""
        self._reveal_after: tuple[str, str] | None = None  # (decision, what) to show next load
        self._data: PlanData | None = None  # what is shown: the last load
        self._rest_unread = False  # the first load was partial, the rest not asked for yet

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlanStatus(id="plan-status")
        with Horizontal(id="plan-body"):
            yield DecisionTree(id="tree")
            yield DecisionDetail(id="detail")
        yield Working(id="working")
        yield KeysFooter()

    def on_mount(self) -> None:
        # The first load starts here, so the store is read while the screen is laid out
        # and painted (the ScreenResume that follows the push came ~0.1 s of the loop's
        # time later). The influence graph opens once the whole tree is shown: read beside
        # the first load, it held that load back.
        self.query_one(DecisionTree).focus()
        self.refresh_data()

    def on_unmount(self) -> None:
        OPEN_GRAPHS.close(self.plan_id)
        services(self).thaw_heap()

    def on_screen_resume(self) -> None:
        """Back from a dialog or another screen: reload only if the store changed since the
        last load (a reload of a 10,000-decision plan after every closed dialog held the
        next cursor move for a second on a loaded machine)."""
        if self._data is not None:  # None: the first load, from on_mount, is under way
            self._reload_if_changed(self._data.fingerprint)

    def on_store_changed(self, _: StoreChanged) -> None:
        self.refresh_data()  # the influence graph catches up if the decisions changed

    @work(thread=True, exclusive=True, group="graph", exit_on_error=False)
    def open_influence_graph(self) -> None:
        """Keep the plan's influence graph in memory while it is shown, so correction
        previews answer without querying the store (engine/core/influence.py); when it is
        open, only the decisions recorded since are read into it."""
        OPEN_GRAPHS.catch_up(self.store, self.plan_id)

    # -- data ---------------------------------------------------------------------------------

    def refresh_data(self) -> None:
        """Reload what the screen shows, in a thread; :meth:`on_plan_data_loaded` patches
        the tree with it on the event loop."""
        self._load_data(self.show_superseded, self.query_one(DecisionTree).index, self._data)

    # a description of its own: by default the worker's quotes its arguments, and the last
    # load's 10,000 rows took 0.4 s to print, on the event loop
    @work(thread=True, exclusive=True, group="data", exit_on_error=False, description="load")
    def _load_data(self, show_superseded: bool, shown: TreeIndex, last: PlanData | None) -> None:
        """Read the plan, and arrange its tree against the one ``shown`` (here, not on the
        event loop: on a 10,000-decision plan that is most of a refresh's work)."""
        try:
            data = read_plan_data(self.store, self.plan_id, show_superseded, shown, last)
        except Exception as exc:  # deleted meanwhile, database gone: a notification
            self.post_message(LoadFailed(str(exc)))
            return
        self.post_message(PlanDataLoaded(data))

    @work(thread=True, exclusive=True, group="data-check", exit_on_error=False)
    def _reload_if_changed(self, known: tuple[object, ...]) -> None:
        try:
            changed = tui_queries.fingerprint(self.store) != known
        except Exception as exc:  # the database went away: a notification
            self.post_message(LoadFailed(str(exc)))
            return
        if changed:
            self.app.call_from_thread(self.refresh_data)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`e` only while the strategy can still be edited (before Execute): a key that
        can never act is not shown."""
        if action == "edit_strategy":
            return self._editable(self.plan)
        return True

    @staticmethod
    def _editable(plan: Plan | None) -> bool:
        return plan is not None and plan.phase is Phase.STRATEGIZE and not plan.state.is_terminal

    def on_plan_data_loaded(self, message: PlanDataLoaded) -> None:
        data = message.data
        if data.show_superseded != self.show_superseded:
            return  # toggled meanwhile: the load that follows the toggle shows it
        tree = self.query_one(DecisionTree)
        last, self._data = self._data, data
        # the graph is read once the whole tree is shown (read beside the first load, it
        # held that back), and caught up when another process changed the plan's decisions
        graph_stale = not data.partial and (
            last is None or last.partial or last.counts != data.counts
        )
        old, self.plan = self.plan, data.plan
        if self._editable(old) != self._editable(self.plan):
            self.refresh_bindings()  # `e` comes or goes with the phase (the footer redraws)
        self.title = f"plan · {data.plan.action}"
        hidden = (
            f" · {data.hidden_superseded} superseded hidden (s)" if data.hidden_superseded else ""
        )
        self.sub_title = (
            f"the first {len(data.index.rows)} decisions · reading the rest…"
            if data.partial
            else counted(len(data.index.rows), "decision") + hidden
        )
        changed, grown = data.changed, data.grown
        if data.base is not tree.index:  # another load was shown meanwhile: compare here
            changed, grown = data.index.changed_since(tree.index), None
        tree.load(data.index, changed, keep=tree.current, grown=grown)
        self._show_status(data)
        services(self).compact_heap()  # after every load: its rows out of the collector's way
        if data.partial:  # the rest of the tree, patched in when read
            self._rest_unread = True
            if tree.current is None:  # no details to wait for
                self._read_rest()
        elif graph_stale:
            self.open_influence_graph()
        if self._reveal_after is not None:
            decision_id, what = self._reveal_after
            self._reveal_after = None
            if not tree.reveal(decision_id):
                self.notify(f"{what} {decision_id} is not in this plan's tree", severity="warning")

    def _read_rest(self) -> None:
        """The rest of a partly read tree, once the first decision's details are drawn: a
        thread reading 10,000 rows beside the details' worker and the frames that show the
        first rows and the details held the interpreter lock against both."""
        if self._rest_unread:
            self._rest_unread = False
            self.call_after_refresh(self.refresh_data)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The details' worker is done (their message is handled first: posted before):
        the rest of the tree may be read. (AgentsScreen's handler runs too.)"""
        if event.worker.group == "detail" and event.state in FINISHED:
            self._read_rest()

    def on_load_failed(self, message: LoadFailed) -> None:
        """The plan was deleted, or the database went away: say so, back to the list
        (what is shown of the plan can no longer be acted on)."""
        self.notify(message.error, title="Cannot show the plan", severity="error", timeout=10)
        if self.is_current:
            services(self).leave_plan()

    def _show_status(self, data: PlanData) -> None:
        self.query_one(PlanStatus).show(
            data.plan, data.pending, data.events, goes_on=data.goes_on_with_a_run
        )
        for approval in data.pending:
            if approval.kind is ApprovalKind.RECONCILE and approval.approval_id not in self._warned:
                self._warned.add(approval.approval_id)
                self.notify(
                    approval.question,
                    title="Sandbox files changed outside the plan",
                    severity="warning",
                    timeout=20,
                )

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        ident = event.node.data
        if ident and not ident.startswith(MORE):
            self.load_detail(ident)

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def load_detail(self, decision_id: str) -> None:
        try:
            e = explain_decision(self.store, decision_id)
            group = tui_queries.checkpoint_group(self.store, e.plan.plan_id, decision_id)
        except UserError as exc:
            self.post_message(DecisionFailed(decision_id, str(exc)))
            return
        self.post_message(DecisionLoaded(e, group))

    def on_decision_loaded(self, message: DecisionLoaded) -> None:
        if message.explanation.decision.decision_id != self.query_one(DecisionTree).current:
            return  # the cursor moved on meanwhile
        self.query_one(DecisionDetail).show_explanation(message.explanation, message.group)

    def on_decision_failed(self, message: DecisionFailed) -> None:
        self.notify(message.error, severity="error")

    # -- navigation ---------------------------------------------------------------------------

    def _goto(self, decision_id: str | None, what: str) -> None:
        tree = self.query_one(DecisionTree)
        if decision_id is None:
            self.notify(f"no {what}", severity="warning")
            return
        if tree.row(decision_id) is None and not self.show_superseded:
            self.show_superseded = True
            self._reveal_after = (decision_id, what)  # once the superseded rows are loaded
            self.refresh_data()
            return
        if not tree.reveal(decision_id):
            self.notify(f"{what} {decision_id} is not in this plan's tree", severity="warning")

    def correct_how(self, denial: Denial) -> str:
        if _made_the_call(denial) is None:
            return "select it and press c"
        return "selects it; then press c"

    def on_correct_chosen(self, denial: Denial) -> None:
        """After a failed call's denial: the decision that made the call, selected."""
        made_the_call = _made_the_call(denial)
        if made_the_call is None:
            super().on_correct_chosen(denial)
            return
        self._goto(made_the_call, "decision that made the call")
        self.notify("the decision that made the call is selected: press c to correct it")

    def action_goto_parent(self) -> None:
        tree = self.query_one(DecisionTree)
        self._goto(tree.parent_of(tree.current) if tree.current else None, "parent")

    def action_goto_next_sibling(self) -> None:
        tree = self.query_one(DecisionTree)
        self._goto(tree.next_sibling_of(tree.current) if tree.current else None, "next sibling")

    def action_goto_replaced(self) -> None:
        tree = self.query_one(DecisionTree)
        row = tree.row(tree.current) if tree.current else None
        if row is not None and row.is_correction:
            self._goto(row.corrects_decision_id, "corrected decision")
        elif row is not None and row.superseded_by:
            self._goto(row.superseded_by, "replacement")
        else:
            self.notify("this decision is neither a correction nor superseded", severity="warning")

    @work(exclusive=True, group="search", exit_on_error=False)
    async def action_search(self) -> None:
        """`/`: the next decision whose id starts with, or whose type or choice contains,
        what was typed; `/` then Enter again finds the one after."""
        query = await self.app.push_screen_wait(
            ReasonModal("Find a decision", "text or id prefix, Enter to find", self._last_search)
        )
        if not query:
            return
        self._last_search = query
        tree = self.query_one(DecisionTree)
        found = tree.find(query, after=tree.current)
        if found is None:
            self.notify(f"no decision matches {query!r}", severity="warning")
        else:
            tree.reveal(found)

    def _selected(self, what: str) -> str | None:
        """The decision under the cursor; None, after asking to select ``what``, when none is."""
        decision_id = self.query_one(DecisionTree).current
        if decision_id is None:
            self.notify(f"select {what} first", severity="warning")
        return decision_id

    def action_copy_id(self) -> None:
        decision_id = self._selected("a decision")
        if decision_id is None:
            return
        self.app.copy_to_clipboard(decision_id)
        self.notify(f"copied {decision_id}")

    @work(exclusive=True, group="child", exit_on_error=False)
    async def action_open_child(self) -> None:
        """`j` on a subplan_spawn decision opens the child plan it spawned; esc comes back."""
        decision_id = self._selected("a subplan_spawn decision")
        if decision_id is None:
            return
        child = await asyncio.to_thread(tui_queries.child_plan_of, self.store, decision_id)
        if child is None:
            self.notify("this decision spawned no child plan", severity="warning")
            return
        services(self).open_plan(child)

    def action_toggle_superseded(self) -> None:
        self.show_superseded = not self.show_superseded
        self.refresh_data()

    # -- correction ---------------------------------------------------------------------------

    @work(exclusive=True, group="correct", exit_on_error=False)
    async def action_correct(self) -> None:
        tree = self.query_one(DecisionTree)
        decision_id = tree.current
        row = tree.row(decision_id) if decision_id else None
        if decision_id is None or row is None:
            self.notify("select a decision first", severity="warning")
            return
        summary = (
            f"{row.decision_type} · {row.phase}\n{one_line(row.chosen_option, 80)}\n{decision_id}"
        )
        # reads, like the preview below: in a thread, so the event loop never waits on them
        blocked = await asyncio.to_thread(replay_blocker, self.store, self.plan_id)
        applied = self.plan is not None and self.plan.state is PlanState.APPLIED
        request = await self.app.push_screen_wait(
            CorrectionDialog(summary, blocked, applied=applied)
        )
        if request is None:
            return
        options = services(self).run_options  # where the replay will run
        base = options.sandbox_base if options else None
        await self._preview_confirm_replay(
            lambda: preview(
                self.store, decision_id, request.mode, request.guidance, sandbox_base=base
            )
        )

    @work(exclusive=True, group="correct", exit_on_error=False)
    async def action_edit_strategy(self) -> None:
        """Before Execute: replace a Strategize decision (engine/correct/strategy.py)."""
        decision_id = self._selected("a strategy decision")
        if decision_id is None:
            return
        try:
            decision = await asyncio.to_thread(editable_strategy_decision, self.store, decision_id)
        except UserError as exc:
            self.notify(str(exc), title="Cannot edit the strategy", severity="error", timeout=10)
            return
        text = await self.app.push_screen_wait(
            StrategyDialog(
                decision.question, decision.chosen_option, decision.alternatives_considered
            )
        )
        if text is None:
            return
        await self._preview_confirm_replay(
            lambda: preview_strategy_edit(self.store, decision_id, text)
        )

    async def _preview_confirm_replay(self, make_preview: Callable[[], Impact]) -> None:
        """The impact preview (affected decisions highlighted), each warning y/N, keep or
        discard the files changed outside the plan that the revert rolls back, then the
        replay; opens the diff when it succeeded."""
        tree = self.query_one(DecisionTree)
        working = self.query_one(Working)
        working.start("computing the impact preview: what the correction would roll back…")
        row_of = tree.index.rows.get  # the rows shown now: the index is replaced, not changed

        def preview_and_text() -> tuple[Impact, Text]:
            impact = make_preview()
            return impact, impact_text(impact, row_of)

        try:
            impact, text = await asyncio.to_thread(preview_and_text)
        except UserError as exc:
            self.notify(str(exc), title="Correction refused", severity="error", timeout=10)
            return
        except Exception as exc:  # the store went away meanwhile: a notification
            self.notify(str(exc), title="Cannot preview the correction", severity="error")
            return
        finally:
            working.stop()
        tree.highlight(impact.affected_decisions)
        try:
            preview_modal = ImpactModal(impact, text=text)
            go = await self.app.push_screen_wait(preview_modal)
            impact = preview_modal.impact  # with the alternative picked there, if any
            for number, warning in enumerate(impact.warnings, 1):
                if not go:
                    break
                go = await self.app.push_screen_wait(
                    ConfirmModal(warning, title=f"Warning {number} of {len(impact.warnings)}")
                )
            outside = None
            if go and impact.outside_changes:
                outside = await self.app.push_screen_wait(
                    OutsideChangesModal(impact.outside_changes)
                )
                go = outside is not None
        finally:
            tree.highlight(())
        if not go:
            self.notify("Correction cancelled: nothing was changed.")
            return
        correction_id = await self.app.push_screen_wait(ReplayModal(impact, outside))
        self.refresh_data()
        if correction_id:
            services(self).open_diff(correction_id)


def _made_the_call(denial: Denial) -> str | None:
    """The decision whose failed call (or guard) was denied; None at the Apply gate, where
    the person picks the decision whose result was wrong."""
    approval = denial.approval
    return None if approval.kind is ApprovalKind.APPLY_GATE else approval.decision_id
