"""The event loop never waits on the store: while the poll's read of a changed store is
held, the cursor keys go on moving the cursor (issue 17); a preview held as long says it
is working (issue 22)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from textual.pilot import Pilot
from textual.widgets import Static
from textual.worker import WorkerState

from cleveragents_tui.engine.run.lifecycle import pause_plan
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from cleveragents_tui.tui.widgets.working import Working
from tests.tui.conftest import SIZE, DemoPlan, settle
from tests.tui.test_correction_flow import RECORD

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def every_connection_taken(engine: Engine) -> Iterator[None]:
    """Hold every connection of the store's pool, as many readers at once would: the next
    read waits for one. (In WAL mode a writer never blocks a reader, so a read is held
    where it really can wait: for a connection.) The recording's held connection, if the
    store has one out already (store/recording.py HeldConnections), counts as taken."""
    pool = engine.pool
    free = pool.size() + pool._max_overflow - pool.checkedout()  # type: ignore[attr-defined]
    held = [engine.raw_connection() for _ in range(free)]
    try:
        yield
    finally:
        for connection in held:
            connection.close()  # back to the pool: the waiting read goes on


async def test_cursor_keys_move_while_the_polls_read_waits(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        tree = screen.query_one(DecisionTree)
        status = screen.query_one(PlanStatus)
        assert "awaiting_approval" in status.plain_text
        pause_plan(demo_plan.store, demo_plan.plan.plan_id)  # another process changes it
        with every_connection_taken(demo_plan.store.engine):
            poll = app.poll_store()  # the timer's call: its read now waits
            lines = [tree.cursor_line]
            for _ in range(4):
                await pilot.press("down")
                lines.append(tree.cursor_line)
            assert lines == list(range(lines[0], lines[0] + 5)), lines  # every key acted
            assert poll.is_running  # ... while the read still waited
            assert "awaiting_approval" in status.plain_text
        await settle(app, pilot)
        assert poll.state is WorkerState.SUCCESS
        assert "paused" in status.plain_text  # the change shows once the read is done
        assert tree.cursor_line == lines[-1]  # and the cursor stays where the keys put it


async def test_a_slow_preview_says_it_is_working_until_the_preview_shows(
    demo_plan: DemoPlan,
) -> None:
    """Issue 22: `c` → a preview that takes longer than a moment shows a spinner and what
    it is doing; the spinner goes when the preview arrives."""
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        working = screen.query_one(Working)
        screen.query_one(DecisionTree).reveal(demo_plan.decision(RECORD))
        await pilot.press("c")
        await settle_on(pilot, lambda: isinstance(app.screen, CorrectionDialog))
        await pilot.press(*"record rc1")
        assert not working.shown
        with every_connection_taken(demo_plan.store.engine):
            await pilot.press("enter")  # the preview's reads now wait
            await settle_on(pilot, lambda: working.shown)
            assert app.screen is screen  # no modal yet: the preview is still held
            assert "impact preview" in str(working.query_one(Static).render())
        await settle_on(pilot, lambda: isinstance(app.screen, ImpactModal))
        assert not working.shown


async def settle_on(pilot: Pilot[None], done: Callable[[], bool]) -> None:
    """Let the app run until ``done()`` (a timer or a worker makes it true)."""
    async with asyncio.timeout(30):
        while not done():
            await pilot.pause()


async def test_an_action_whose_read_fails_is_a_notification(demo_plan: DemoPlan) -> None:
    """`d` reads the plan's corrections in a worker; with the database gone that read fails
    in a way no action foresees: a notification, and the app goes on (no traceback)."""
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        demo_plan.store.close()
        Path(str(demo_plan.store.engine.url.database)).unlink()
        await pilot.press("d")
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen) and app.is_running
        errors = [n for n in app._notifications if n.severity == "error"]
        assert [n.title for n in errors] == ["Something went wrong"], errors
