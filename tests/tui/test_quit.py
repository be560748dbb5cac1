"""Quitting while the engine works in the app (a correction's replay, a plan run): the app
asks first, then pauses the plan and quits once the work has stopped at its next safe point,
so nothing is left running behind a closed window; `agents plan run` resumes it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from cleveragents_tui.actors.reasoners.scripted import ScriptedReasoner
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionStatus, PlanState
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle
from tests.tui.test_controls import _HeldReasoner

pytestmark = pytest.mark.anyio


def _state(demo_plan: DemoPlan) -> PlanState:
    return show_plan(demo_plan.store, demo_plan.plan.plan_id).summary.plan.state


async def test_quit_during_a_replay_asks_then_pauses_and_quits_once_it_stopped(
    demo_plan: DemoPlan,
) -> None:
    entered, release = threading.Event(), threading.Event()

    def factory(action: Action, current: Callable[[], dict[str, str]]) -> _HeldReasoner:
        return _HeldReasoner(ScriptedReasoner(action, current), entered, release)

    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    app.run_options = RunOptions(
        sandbox_base=demo_plan.options.sandbox_base, reasoner_factory=factory
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.screen.query_one(DecisionTree).reveal(demo_plan.decision("A row in the releases table"))
        await pilot.press("c", *"record rc1", "enter")
        await pilot.pause()
        await pilot.press("1", "y")
        await pilot.pause()
        while isinstance(app.screen, ConfirmModal):  # each warning
            await pilot.press("y")
            await pilot.pause()
        replay = app.screen
        assert isinstance(replay, ReplayModal) and replay.worker is not None
        assert await asyncio.to_thread(entered.wait, 30), "the replay never reached Execute"

        await pilot.press("ctrl+q")  # asks first; No keeps everything as it was
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert "a correction's replay on plan" in app.screen.question
        assert f"agents plan run {demo_plan.plan.plan_id}" in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen_stack[-1], ReplayModal) and app.is_running
        assert _state(demo_plan) is PlanState.RUNNING

        await pilot.press("ctrl+q", "y")  # yes: pause, then quit once the replay stopped
        await pilot.pause()
        stopping = app.quitting
        assert stopping is not None
        while _state(demo_plan) is not PlanState.PAUSED:
            await pilot.pause()
        assert app.is_running  # the replay is still held: the app waits for it
        await pilot.press("q")  # a second quit does not cut the wait short
        await pilot.pause()
        assert app.is_running
        release.set()
        await stopping.wait()
        assert replay.finished and replay.result is not None
    assert replay.result.correction.status is CorrectionStatus.SUCCEEDED
    assert replay.result.plan.state is PlanState.PAUSED  # stopped at its safe point
    plan = resume_plan(demo_plan.store, demo_plan.plan.plan_id, demo_plan.options)
    assert (plan.state, plan.attempt) == (PlanState.AWAITING_APPROVAL, 2)


async def test_quit_with_nothing_running_quits_at_once(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running
