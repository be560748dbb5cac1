"""Quitting while the engine works in the app (a correction's replay, a plan run): the app
asks first, then pauses the plan and quits once the work has stopped at its next safe point,
so nothing is left running behind a closed window; `agents plan run` resumes it."""

from __future__ import annotations

import asyncio

import pytest

from cleveragents_tui.domain.enums import CorrectionStatus, PlanState
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
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


async def test_a_second_run_or_apply_while_one_runs_is_refused_and_quit_waits_for_the_first(
    demo_plan: DemoPlan,
) -> None:
    """A second `R` (or an `A`) while the first run still works is refused, saying so: it
    used to replace the first run's worker in the app's record, and quitting then neither
    paused nor waited for the first run, which went on behind the closed window."""
    app, entered, release = held_app(demo_plan)
    async with app.run_test(size=SIZE) as pilot:
        replay = await start_held_replay(app, pilot, demo_plan, entered)
        await pilot.press("x")  # pause the plan mid-replay: it stops before Execute's end
        await pilot.pause()
        assert replay.pausing is not None and replay.worker is not None
        await replay.pausing.wait()
        entered.clear()
        release.set()
        await replay.worker.wait()
        await pilot.pause()
        release.clear()  # the run `R` starts is held in Execute too
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("R")
        await pilot.pause()
        assert await asyncio.to_thread(entered.wait, 30), "the run never reached Execute"
        [first] = app.engine_runs()

        await pilot.press("R")
        await pilot.pause()
        assert app.engine_runs() == [first] and not first.worker.is_finished
        await pilot.press("A")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)  # no Apply confirmation either
        assert app.engine_runs() == [first]
        warned = "a plan run is already going on this plan: wait for it or pause it (P)"
        assert [n.message for n in app._notifications].count(warned) == 2

        await pilot.press("ctrl+q", "y")  # pauses the first run, and waits for it
        await pilot.pause()
        stopping = app.quitting
        assert stopping is not None
        while _state(demo_plan) is not PlanState.PAUSED:
            await pilot.pause()
        assert app.is_running and not first.worker.is_finished
        release.set()
        await stopping.wait()
        assert first.worker.is_finished
    assert _state(demo_plan) is PlanState.PAUSED
