"""The app's append preview says what an append does (issue 14, finding 5): no decision
superseded, the appended plan's decisions, the sandboxes it works in — then the append runs
only that work."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import pytest
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Log, RadioButton, Static

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle
from tests.tui.test_controls import held_app

pytestmark = pytest.mark.anyio
S = TypeVar("S", bound=Screen[Any])

STRATEGY = "A plain function registered in COMMANDS"


async def test_the_append_preview_names_the_appended_plans_work(demo_plan: DemoPlan) -> None:
    app = demo_plan.app()
    target = demo_plan.decision(STRATEGY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        tree = screen.query_one(DecisionTree)
        assert tree.reveal(target)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("c")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, CorrectionDialog)
        await pilot.click("#mode-append")
        dialog.query_one("#guidance").focus()
        await pilot.press(*"use a greeter class")
        await pilot.press("enter")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, ImpactModal)
        assert modal.impact.mode is CorrectionMode.APPEND
        shown = str(modal.query_one("#impact-text").render())
        assert "no decision superseded" in shown and "superseded and re-made" not in shown
        assert "strategy (strategize): A greeter class with a configurable greeting" in shown
        assert "implement-class (execute)" in shown and "local/write-file" in shown
        assert f"the sandboxes of plan {demo_plan.plan.plan_id}" in shown
        assert tree.affected == frozenset()  # nothing in the tree is superseded
        await pilot.press("y")
        await pilot.pause()
        replay = app.screen
        assert isinstance(replay, ReplayModal) and replay.worker is not None
        await replay.worker.wait()
        await pilot.pause()
        assert replay.result is not None
        assert replay.result.correction.status is CorrectionStatus.SUCCEEDED
        appended = replay.result.correction.appended_plan_id
    assert appended is not None
    with demo_plan.store.unit_of_work() as uow:
        made = set(uow.decisions.current_steps(appended))
    assert made == {"prompt", "strategy", "implement-class"}


async def test_on_an_applied_plan_the_dialog_chooses_append_and_says_why(
    demo_plan: DemoPlan,
) -> None:
    """A revert of an applied plan is refused (its changes landed): the dialog starts on
    append, says why, and its preview is an append's — no refusal to read first."""
    apply_plan(demo_plan.store, demo_plan.plan.plan_id, "tester", demo_plan.options)
    target = demo_plan.decision(STRATEGY)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        assert tree.reveal(target)
        await settle(app, pilot)
        await pilot.press("c")
        dialog = await _shown(pilot, CorrectionDialog)  # its worker waits on the dialog
        assert dialog.query_one("#mode-append", RadioButton).value
        revert = dialog.query_one("#mode-revert", RadioButton)
        assert not revert.value and revert.disabled  # refused: it cannot be chosen
        # the set's cursor (Textual's "-selected") is on append, not on the first button
        assert dialog.query_one("#mode-append", RadioButton).has_class("-selected")
        said = str(dialog.query_one("#correction-applied", Static).render())
        assert "applied" in said and "append" in said
        await pilot.press(*"use a greeter class", "enter")
        modal = await _shown(pilot, ImpactModal)
        assert modal.impact.mode is CorrectionMode.APPEND


async def _shown(pilot: Pilot[None], kind: type[S]) -> S:
    """The screen of ``kind`` once the app shows it (its reads run in a thread first)."""
    for _ in range(10_000):  # a bound on a wait that ends as soon as the screen shows
        if isinstance(pilot.app.screen, kind):
            return pilot.app.screen
        await pilot.pause()
    raise AssertionError(f"no {kind.__name__} shown; the screen is {pilot.app.screen!r}")


async def test_cancelling_an_append_to_an_applied_plan_pauses_the_appended_plan(
    demo_plan: DemoPlan,
) -> None:
    """The applied plan cannot be paused; what runs is the appended plan, and `x` pauses
    that one. It said the cancel was not possible and let the appended plan run on."""
    apply_plan(demo_plan.store, demo_plan.plan.plan_id, "tester", demo_plan.options)
    app, entered, release = held_app(demo_plan)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.screen.query_one(DecisionTree).reveal(demo_plan.decision(STRATEGY))
        await settle(app, pilot)
        await pilot.press("c")
        await _shown(pilot, CorrectionDialog)
        await pilot.press(*"use a greeter class", "enter")
        await _shown(pilot, ImpactModal)
        await pilot.press("y")
        replay = await _shown(pilot, ReplayModal)
        assert await asyncio.to_thread(entered.wait, 30), "the append never reached Execute"
        await pilot.press("x")
        await pilot.pause()
        assert replay.pausing is not None
        await replay.pausing.wait()
        await pilot.pause()
        said = "\n".join(replay.query_one("#replay-log", Log).lines)
        assert "cancel: plan paused" in said, said
        release.set()
        assert replay.worker is not None
        await replay.worker.wait()
        await pilot.pause()
        assert replay.result is not None
        appended = replay.result.correction.appended_plan_id
    assert appended is not None
    with demo_plan.store.unit_of_work() as uow:
        plan = uow.plans.get(appended)
        made = set(uow.decisions.current_steps(appended))
    assert plan.state is PlanState.PAUSED  # stopped after its step, not run to its gate
    assert f"agents plan run {appended}" in said
    assert "implement-class" in made  # the step under way when `x` came was finished
    resumed = resume_plan(demo_plan.store, appended, demo_plan.options)
    assert resumed.state is PlanState.AWAITING_APPROVAL
