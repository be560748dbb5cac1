"""A large plan's first screen and its impact preview (issue 17, docs/benchmarks.md "tui"):
opened, the plan shows its tree and the first decision's details, then the rest of the
tree; the preview of a correction affecting every decision names them, scrolls to the
last one named, and answers its keys."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.containers import VerticalScroll

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.correct.model import Impact
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.impact import ImpactModal, impact_text
from cleveragents_tui.tui.screens.plan_data import FIRST_ROWS
from cleveragents_tui.tui.widgets.decision_detail import DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.views.impact import NAMED_AT_MOST
from tests.support.impacts import revert_impact
from tests.support.store_rows import add_plan
from tests.tui.conftest import SIZE, settle

pytestmark = pytest.mark.anyio

COUNT = FIRST_ROWS + 160  # read in two parts; more affected than the preview names


def _plan(store: Store) -> tuple[Plan, list[Decision]]:
    """A root and COUNT - 1 decisions under it, option N numbered in recording order."""
    plan = Plan(action="test/large-views")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type=DecisionType.PROMPT_DEFINITION,
        phase=Phase.STRATEGIZE,
        question="q",
        chosen_option="option 0",
    )
    decisions = [root] + [
        Decision(
            plan_id=plan.plan_id,
            parent_decision_id=root.decision_id,
            sequence_number=n,
            decision_type=DecisionType.IMPLEMENTATION_CHOICE,
            phase=Phase.EXECUTE,
            question="q",
            chosen_option=f"option {n}",
        )
        for n in range(1, COUNT)
    ]
    return add_plan(store, plan, decisions)


def _drawn(app: App[None]) -> str:
    """The terminal's text as the app last composed it (every screen shown, dialog on top)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def _impact(plan: Plan, decisions: list[Decision]) -> Impact:
    """A revert of the root: every decision superseded and re-made."""
    return revert_impact(
        plan.plan_id,
        [d.decision_id for d in decisions],
        phase=Phase.STRATEGIZE,
        step_key="root",
        guidance="again",
    )


async def test_a_large_plan_opens_to_its_tree_and_first_decisions_details(
    sqlite_store: Store,
) -> None:
    plan, decisions = _plan(sqlite_store)
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        assert tree.row_count == COUNT  # the rest, read after the details, patched in
        assert tree.current == decisions[0].decision_id
        assert decisions[0].decision_id in app.screen.query_one(DecisionDetail).text
        drawn = _drawn(app)
        assert "option 0" in drawn and "option 1" in drawn  # the tree's first rows
        assert decisions[0].decision_id in drawn  # the details beside it
        assert "? Help" in drawn and "q Quit" in drawn  # the footer


async def test_the_preview_names_every_decision_it_can_scrolls_and_answers_its_keys(
    sqlite_store: Store,
) -> None:
    plan, decisions = _plan(sqlite_store)
    app = AgentsApp(sqlite_store, plan_id=plan.plan_id, user="t", poll_seconds=None)
    answers: list[bool | None] = []
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        impact = _impact(plan, decisions)
        tree.highlight(impact.affected_decisions)
        app.push_screen(ImpactModal(impact, impact_text(impact, tree.row)), answers.append)
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ImpactModal)
        drawn = _drawn(app)
        assert f"decisions superseded and re-made: {COUNT}" in drawn
        assert "root  option 0" in drawn  # the corrected one, first, by its step key
        assert "option 1" in drawn
        assert f"… and {COUNT - NAMED_AT_MOST:,} more" not in drawn  # out of view, below

        body = modal.query_one("#impact-body", VerticalScroll)
        assert body.max_scroll_y > 0
        body.scroll_end(animate=False)
        await pilot.pause()
        drawn = _drawn(app)
        last = NAMED_AT_MOST - 1  # options are numbered in plan order
        assert f"option {last}" in drawn
        assert f"… and {COUNT - NAMED_AT_MOST:,} more" in drawn

        await pilot.press("n")
        await pilot.pause()
        assert answers == [False] and not isinstance(app.screen, ImpactModal)
        app.push_screen(ImpactModal(impact, impact_text(impact, tree.row)), answers.append)
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert answers == [False, True]
