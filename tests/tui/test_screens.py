"""The other flows: plan list filter and sort, approvals, live refresh from another
process, plan control, lazy chunked tree, help and palette."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.binding import Binding
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.run.approvals import pending_approvals
from cleveragents_tui.engine.run.lifecycle import pause_plan
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.reason import ReasonModal
from cleveragents_tui.tui.screens.approvals import ApprovalsScreen
from cleveragents_tui.tui.screens.help import HelpScreen
from cleveragents_tui.tui.screens.plan_list import PlanListScreen
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import CHUNK, MORE, DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.tui.conftest import SIZE, DemoPlan, settle
from tests.tui.fixed_data import CHILD, PLAN, build_fixed, uid

pytestmark = pytest.mark.anyio


async def test_plan_list_nests_filters_and_sorts(sqlite_store: Store) -> None:
    build_fixed(sqlite_store)
    app = AgentsApp(sqlite_store, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)  # the list is read in a worker
        screen = app.screen
        assert isinstance(screen, PlanListScreen)
        assert screen.shown == [PLAN, CHILD, uid(3, "P")]  # the child right under its parent
        await pilot.press("slash", *"fix-ci", "enter")
        await pilot.pause()
        assert screen.shown == [uid(3, "P")]
        await pilot.press("escape")
        await pilot.press("o")  # sort by last update, children stay under the parent
        await pilot.pause()
        assert screen.sort == "updated" and screen.shown == [uid(3, "P"), PLAN, CHILD]


async def test_approve_with_a_reason_records_who_and_when(demo_plan: DemoPlan) -> None:
    app = demo_plan.app()
    [gate] = pending_approvals(demo_plan.store, demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        await pilot.press("a")
        await settle(app, pilot)
        assert isinstance(app.screen, ApprovalsScreen)
        assert [a.approval_id for a in app.screen.approvals] == [gate.approval_id]
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, ReasonModal)
        await pilot.press(*"looks good [ok]", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, ApprovalsScreen) and app.screen.approvals == []
        said = [n.message for n in app._notifications]
        lands = f"R on plan {demo_plan.plan.plan_id[:10]} lands it on the real resources"
        assert f"approved as tester; {lands}" in said, said  # the demo waits at its Apply gate
    with demo_plan.store.unit_of_work() as uow:
        answered = uow.approvals.get(gate.approval_id)
    assert answered.answer is not None and answered.answer.value == "approved"
    assert answered.answered_by == "tester" and answered.reason == "looks good [ok]"
    assert answered.answered_at is not None


async def test_changes_by_another_process_show_up(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        tree = screen.query_one(DecisionTree)
        await pilot.press("down", "down")
        cursor, first = tree.current, tree.root.children[0]
        status = screen.query_one(PlanStatus)
        assert "awaiting_approval" in status.plain_text
        pause_plan(demo_plan.store, demo_plan.plan.plan_id)  # as `agents plan pause` would
        app.poll_store()  # the timer's call: read in a thread, the screen reloads in one
        await app.workers.wait_for_complete()
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert status.plain_text.splitlines()[-1].endswith(" paused")  # the event, in words
        # patched in place: the same nodes, the cursor where it was
        assert tree.root.children[0] is first and tree.current == cursor


async def test_a_database_gone_while_shown_is_a_notification(
    demo_plan: DemoPlan, tmp_path: Path
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        demo_plan.store.close()
        database = Path(str(demo_plan.store.engine.url.database))
        database.unlink()
        database.parent.chmod(0o500)  # nor can it be made again
        try:
            app.poll_store()
            await app.workers.wait_for_complete()
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, PlanScreen)
            screen.refresh_data()
            await settle(app, pilot)
            assert isinstance(app.screen, PlanListScreen)  # back to the list, which says so too
        finally:
            database.parent.chmod(0o700)
        messages = [n.message for n in app._notifications]
        assert any("cannot read the store" in m for m in messages), messages


async def test_a_plan_deleted_while_shown_is_a_notification_and_the_list(
    sqlite_store: Store,
) -> None:
    build_fixed(sqlite_store)
    app = AgentsApp(sqlite_store, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("down", "down", "enter")  # the third plan: no child plan, no run
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen) and app.screen.plan_id == uid(3, "P")
        with sqlite_store.engine.begin() as connection:  # by hand, as with sqlite3: the
            # trigger that keeps decisions for good dropped first
            connection.exec_driver_sql("DROP TRIGGER decisions_no_delete")
            for table in ("decisions", "plans"):
                connection.exec_driver_sql(f"DELETE FROM {table} WHERE plan_id = ?", (uid(3, "P"),))
        app.poll_store()
        await settle(app, pilot)
        assert isinstance(app.screen, PlanListScreen)
        assert app.screen.shown == [PLAN, CHILD]
        messages = [n.message for n in app._notifications]
        assert any(f"plan {uid(3, 'P')} does not exist" in m for m in messages), messages


async def test_cancel_plan_asks_first_and_then_cancels(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("X")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
    with demo_plan.store.unit_of_work() as uow:
        assert uow.plans.get(demo_plan.plan.plan_id).state is PlanState.CANCELLED


async def test_a_tree_that_grows_while_shown_opens_the_new_branches(sqlite_store: Store) -> None:
    """A plan run by another process (or `R`) from its first decision: the rows it adds
    appear expanded, as a fresh load shows them, and the cursor stays where it was."""
    plan = Plan(action="bench/grow")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type=DecisionType.PROMPT_DEFINITION,
        phase=Phase.STRATEGIZE,
        question="q",
        chosen_option="root",
    )
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add_many([root])
        uow.commit()
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        assert tree.row_count == 1 and tree.current == root.decision_id
        strategy = Decision(
            plan_id=plan.plan_id,
            parent_decision_id=root.decision_id,
            sequence_number=1,
            decision_type=DecisionType.STRATEGY_CHOICE,
            phase=Phase.STRATEGIZE,
            question="q",
            chosen_option="a strategy",
        )
        step = Decision(
            plan_id=plan.plan_id,
            parent_decision_id=strategy.decision_id,
            sequence_number=2,
            decision_type=DecisionType.IMPLEMENTATION_CHOICE,
            phase=Phase.EXECUTE,
            question="q",
            chosen_option="a step",
        )
        with sqlite_store.unit_of_work(write=True) as uow:
            uow.decisions.add_many([strategy, step])
            uow.commit()
        app.poll_store()
        await settle(app, pilot)
        top = tree.root.children[0]
        assert top.is_expanded and [c.data for c in top.children] == [strategy.decision_id]
        assert top.children[0].is_expanded
        assert [c.data for c in top.children[0].children] == [step.decision_id]
        assert tree.current == root.decision_id


async def test_a_wide_tree_is_filled_in_chunks_and_jumps_load_what_they_need(
    sqlite_store: Store,
) -> None:
    plan = Plan(action="bench/wide")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type=DecisionType.PROMPT_DEFINITION,
        phase=Phase.STRATEGIZE,
        question="q",
        chosen_option="root",
    )
    kids = [
        Decision(
            plan_id=plan.plan_id,
            parent_decision_id=root.decision_id,
            sequence_number=n,
            decision_type=DecisionType.STRATEGY_CHOICE,
            phase=Phase.STRATEGIZE,
            question="q",
            chosen_option=f"kid {n}",
        )
        for n in range(1, 2 * CHUNK + 51)
    ]
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add_many([root, *kids])
        uow.commit()
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        top = tree.root.children[0]
        assert len(top.children) == CHUNK + 1  # a chunk and a "more" node
        assert (top.children[-1].data or "").startswith(MORE)
        assert tree.reveal(kids[-1].decision_id)  # the last one: loads the chunks it needs
        assert tree.current == kids[-1].decision_id
        assert len(top.children) == len(kids)
        await pilot.press("u")
        assert tree.current == root.decision_id
        await app.workers.wait_for_complete()


def _help_text(help_screen: HelpScreen) -> str:
    console = Console(width=100, record=True, file=io.StringIO())
    for static in help_screen.query(Static):
        console.print(static.content)
    return console.export_text()


async def test_help_lists_every_key_readably_and_the_tree_marks(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        plan_screen = app.screen
        assert isinstance(plan_screen, PlanScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = _help_text(app.screen)
        bindings = [
            *PlanScreen.BINDINGS,
            *DecisionTree.BINDINGS,  # the tree's own keys: focused under the help
            *AgentsApp.BINDINGS,
        ]
        for binding in bindings:
            if isinstance(binding, Binding) and binding.description:
                if binding.action == "edit_strategy":  # the demo plan executes: `e` cannot act
                    assert binding.description not in shown
                else:
                    assert binding.description in shown, binding.description
        assert "question_mark" not in shown and "?" in shown
        for mark in ("↻", "✗", "⚑", "Strategize"):
            assert mark in shown
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        await pilot.press("t")
        assert not app.current_theme.dark
        await app.workers.wait_for_complete()


async def test_help_and_quit_lead_the_footer_at_80_columns(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        for expected in (PlanScreen, PlanListScreen):  # the plan; esc: the plan list
            screen = app.screen
            assert isinstance(screen, expected)
            keys = [
                key for key in screen.active_bindings if screen.active_bindings[key].binding.show
            ]
            assert keys[:2] == ["question_mark", "q"], keys
            footer = screen.query_one(Footer)
            first = [k for k in footer.query(FooterKey)][:2]
            assert [k.key for k in first] == ["question_mark", "q"]
            assert all(k.region.right <= 80 and k.region.width > 0 for k in first)
            await pilot.press("escape")
            await settle(app, pilot)
