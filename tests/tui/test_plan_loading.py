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
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
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
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add_many(decisions)
        uow.commit()
    return plan, decisions


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
