"""Quitting while the engine works in the app (a correction's replay, a plan run): the app
asks first, then pauses the plan and quits once the work has stopped at its next safe point,
so nothing is left running behind a closed window; `agents plan run` resumes it."""

from __future__ import annotations

import pytest

from cleveragents_tui.domain.enums import CorrectionStatus, PlanState
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from tests.tui.conftest import SIZE, DemoPlan, settle
from tests.tui.test_controls import _state, held_app, start_held_replay

pytestmark = pytest.mark.anyio


async def test_quit_during_a_replay_asks_then_pauses_and_quits_once_it_stopped(
    demo_plan: DemoPlan,
) -> None:
    app, entered, release = held_app(demo_plan)
    async with app.run_test(size=SIZE) as pilot:
        replay = await start_held_replay(app, pilot, demo_plan, entered)

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
