"""How the plan screen reads a large plan (issue 17, docs/benchmarks.md "tui"): it paints the
first decisions recorded while the rest are read, then patches them in; a refresh after a
change that left the plan's decisions alone (a pause, an event) does not read the tree
again; one that added a decision shows it."""

from __future__ import annotations

import pytest
from textual.message import Message

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.messages import PlanDataLoaded
from cleveragents_tui.tui.screens.plan_data import FIRST_ROWS
from cleveragents_tui.tui.widgets.decision_detail import DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.support.statements import sent_statements
from tests.support.store_rows import add_plan
from tests.tui.conftest import SIZE, settle

pytestmark = pytest.mark.anyio

PAUSED = PlanState.PAUSED


def _plan(store: Store, count: int) -> tuple[Plan, list[Decision]]:
    """A plan of ``count`` decisions: a root, each later one under an earlier one."""
    plan = Plan(action="test/large")
    decisions: list[Decision] = []
    for n in range(count):
        decisions.append(
            Decision(
                plan_id=plan.plan_id,
                parent_decision_id=decisions[n // 3].decision_id if n else None,
                sequence_number=n,
                decision_type=DecisionType.PROMPT_DEFINITION
                if n == 0
                else DecisionType.IMPLEMENTATION_CHOICE,
                phase=Phase.STRATEGIZE if n == 0 else Phase.EXECUTE,
                question="q",
                chosen_option=f"option {n}",
            )
        )
    return add_plan(store, plan, decisions)


async def test_a_plan_of_one_decision_says_so_in_words(sqlite_store: Store) -> None:
    plan, _ = _plan(sqlite_store, 1)
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.screen.sub_title == "1 decision"  # not "1 decisions"


async def test_a_large_plan_paints_its_first_decisions_then_the_rest(
    sqlite_store: Store,
) -> None:
    count = FIRST_ROWS + 150
    plan, decisions = _plan(sqlite_store, count)
    seen: list[PlanDataLoaded] = []

    def hook(message: Message) -> None:  # called again as the message bubbles up
        if isinstance(message, PlanDataLoaded) and not any(m is message for m in seen):
            seen.append(message)

    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        loads = [(m.data.partial, len(m.data.index.rows)) for m in seen]
        assert loads == [(True, FIRST_ROWS), (False, count)]
        assert tree.row_count == count and app.screen.sub_title == f"{count} decisions"
        assert tree.current == decisions[0].decision_id  # the cursor stayed on the root
        assert tree.reveal(decisions[-1].decision_id)  # one of the rows read second


async def test_a_refresh_reads_the_tree_again_only_when_its_decisions_changed(
    sqlite_store: Store,
) -> None:
    plan, decisions = _plan(sqlite_store, 20)
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        shown = tree.index
        with sqlite_store.unit_of_work(write=True) as uow:  # another process: the plan only
            uow.plans.save(uow.plans.get(plan.plan_id).model_copy(update={"state": PAUSED}))
            uow.commit()
        app.poll_store()
        await settle(app, pilot)
        assert "paused" in app.screen.query_one(PlanStatus).plain_text
        assert tree.index is shown  # the tree was not read again
        more = Decision(
            plan_id=plan.plan_id,
            parent_decision_id=decisions[0].decision_id,
            sequence_number=20,
            decision_type=DecisionType.IMPLEMENTATION_CHOICE,
            phase=Phase.EXECUTE,
            question="q",
            chosen_option="one more",
        )
        with sqlite_store.unit_of_work(write=True) as uow:
            uow.decisions.add(more)
            uow.commit()
        app.poll_store()
        await settle(app, pilot)
        assert tree.row_count == 21 and tree.row(more.decision_id) is not None


def _record(store: Store, plan: Plan, under: str | None, n: int, **fields: object) -> Decision:
    """A decision another process records: sequence number ``n``, under ``under``."""
    values: dict[str, object] = {
        "plan_id": plan.plan_id,
        "parent_decision_id": under,
        "sequence_number": n,
        "decision_type": DecisionType.IMPLEMENTATION_CHOICE,
        "phase": Phase.EXECUTE,
        "question": "q",
        "chosen_option": f"recorded {n}",
    }
    decision = Decision.model_validate(values | fields)
    with store.unit_of_work(write=True) as uow:
        uow.decisions.add(decision)
        uow.commit()
    return decision


def _tree_reads(statements: list[str]) -> list[str]:
    """The statements that read tree rows (the only reads of a decision's chosen option
    while the cursor stays put: its details are not read again)."""
    return [s for s in statements if "decisions.chosen_option" in s]


async def test_decisions_recorded_while_shown_are_added_in_place(sqlite_store: Store) -> None:
    plan, decisions = _plan(sqlite_store, 20)  # decision n sits under decision n // 3
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        await pilot.press("down", "down", "down")
        cursor = tree.current
        folded = tree._node_of[decisions[2].decision_id]
        folded.collapse()  # the user closed a branch
        await settle(app, pilot)
        nodes, rows = dict(tree._node_of), tree.index.rows
        first = _record(sqlite_store, plan, decisions[4].decision_id, 20)
        second = _record(sqlite_store, plan, first.decision_id, 21)
        hidden = _record(sqlite_store, plan, decisions[2].decision_id, 22)
        with sent_statements(sqlite_store.engine) as statements:
            app.poll_store()
            await settle(app, pilot)

        # only the rows recorded since were read: one read, of those after the last shown
        [read] = _tree_reads(statements)
        assert "decisions.sequence_number >" in read
        assert all(tree.index.rows[ident] is row for ident, row in rows.items())
        # shown where a fresh load shows them, under their parents
        under = tree._node_of[decisions[4].decision_id]
        assert under.children[-1].data == first.decision_id
        assert [c.data for c in under.children[-1].children] == [second.decision_id]
        assert tree.parent_of(hidden.decision_id) == decisions[2].decision_id
        assert app.screen.sub_title == "23 decisions"
        # the rest untouched: the same nodes, the cursor, the closed branch closed
        assert all(tree._node_of[ident] is node for ident, node in nodes.items())
        assert tree.current == cursor and not folded.is_expanded
        folded.expand()
        await settle(app, pilot)
        assert folded.children[-1].data == hidden.decision_id


async def test_a_correction_while_shown_reads_the_tree_again(sqlite_store: Store) -> None:
    """Decisions shown were superseded (another process corrected the plan): the whole tree
    is read again, the superseded ones hidden, the correction shown."""
    plan, decisions = _plan(sqlite_store, 20)
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        await pilot.press("down")
        cursor = tree.current
        target = decisions[2].decision_id
        subtree = [target, *(d.decision_id for d in decisions[6:9])]  # 2 and its children
        correction = _record(
            sqlite_store,
            plan,
            decisions[0].decision_id,
            20,
            decision_type=DecisionType.USER_INTERVENTION,
            is_correction=True,
            corrects_decision_id=target,
        )
        with sqlite_store.unit_of_work(write=True) as uow:
            uow.decisions.supersede(subtree, by=correction.decision_id)
            uow.commit()
        with sent_statements(sqlite_store.engine) as statements:
            app.poll_store()
            await settle(app, pilot)

        assert any("decisions.sequence_number >" not in s for s in _tree_reads(statements))
        assert all(tree.row(ident) is None for ident in subtree)
        assert tree.parent_of(correction.decision_id) == decisions[0].decision_id
        assert tree.parent_of(decisions[18].decision_id) is None  # under 6: now at the top
        sub_title = app.screen.sub_title
        assert sub_title is not None
        assert tree.row_count == 17 and "4 superseded hidden" in sub_title
        assert tree.current == cursor


async def test_the_first_decisions_of_a_plan_shown_empty_get_the_cursor(
    sqlite_store: Store,
) -> None:
    """A plan opened before it ran (`R` runs it): its first decisions appear with the
    cursor on the root, and the root's details beside it."""
    plan, _ = _plan(sqlite_store, 0)
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        assert tree.row_count == 0
        root = _record(
            sqlite_store,
            plan,
            None,
            0,
            decision_type=DecisionType.PROMPT_DEFINITION,
            phase=Phase.STRATEGIZE,
        )
        _record(sqlite_store, plan, root.decision_id, 1)
        app.poll_store()
        await settle(app, pilot)
        assert tree.row_count == 2 and tree.current == root.decision_id
        assert "recorded 0" in app.screen.query_one(DecisionDetail).text
