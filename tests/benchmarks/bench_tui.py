"""The app, headless: open a plan of 10,000 decisions to a first painted tree, and one cursor
move in it: from the key's action to the next frame the app composes (the details of the
decision, loaded by a worker, are reported separately).

Baselines measured in the same run: an empty Textual app's first paint, and a cursor move in
a plain 10-node Textual ``Tree`` timed the same way.

Why not ``pilot.pause()``: it waits for the app to be idle for a while, which adds a floor of
about 40 ms to any measurement; the frame is composed long before that.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static, Tree
from textual.worker import WorkerCancelled

from cleveragents_tui.domain.enums import CorrectionMode, Phase, PlanState
from cleveragents_tui.engine.correct.model import Impact, Tier
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_detail import DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.benchmarks.bench_plan_tree import build_plan
from tests.benchmarks.harness import Measurement

SIZE = (120, 40)


class EmptyApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("hello")


class SmallTreeApp(App[None]):
    def compose(self) -> ComposeResult:
        tree: Tree[None] = Tree("root")
        for n in range(10):
            tree.root.add_leaf(f"node {n}")
        tree.root.expand()
        yield tree


async def _empty_paint() -> float:
    start = time.perf_counter()
    async with EmptyApp().run_test(size=SIZE) as pilot:
        await pilot.pause()
        return time.perf_counter() - start


async def _move_to_frame(app: App[None], tree: Tree[str] | Tree[None]) -> float:
    """Seconds from a cursor move to the next frame the app composes (``App._display`` is
    called with the screen's update; headless, it is not written anywhere)."""
    framed = asyncio.Event()
    display = app._display

    def spy(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        if renderable is not None:
            framed.set()

    app._display = spy  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        tree.action_cursor_down()  # the key's action, without the Pilot's own key simulation
        await framed.wait()
        return time.perf_counter() - start
    finally:
        app._display = display  # type: ignore[method-assign]


async def _small_move() -> float:
    async with SmallTreeApp().run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = pilot.app.query_one(Tree)
        tree.focus()
        await pilot.pause()
        return await _move_to_frame(pilot.app, tree)


async def _settle(app: App[None], pilot: Pilot[None]) -> None:
    """Until every worker is done and its messages are handled."""
    for _ in range(3):
        with contextlib.suppress(WorkerCancelled):  # an exclusive worker replaced by a newer
            await app.workers.wait_for_complete()
        await pilot.pause()


class _GapMeter:
    """The longest the event loop went without running a 1 ms ticker: how long a key
    press would have waited."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - before - 0.001)

    def __enter__(self) -> _GapMeter:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def _idle_gap() -> float:
    """The baseline: the longest gap of an empty app's loop over the same number of polls."""
    async with EmptyApp().run_test(size=SIZE) as pilot:
        await pilot.pause()
        with _GapMeter() as meter:
            for _ in range(5):
                await pilot.pause()
        return meter.longest


async def _gap_while_store_changes(store: Store, plan_id: str) -> float:
    """Open the plan, then five times: another process pauses or resumes it, the poll
    notices, the screen reloads (a 10k tree patched in place); the longest event-loop gap over all of it."""
    app = AgentsApp(store, plan_id=plan_id, poll_seconds=None, user="bench")
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        with _GapMeter() as meter:
            for n in range(5):
                _set_state(store, plan_id, PlanState.PAUSED if n % 2 else PlanState.RUNNING)
                app.poll_store()
                await _settle(app, pilot)
        return meter.longest


def _set_state(store: Store, plan_id: str, state: PlanState) -> None:
    """What another process's pause or run writes (the bench plan has no action to run)."""
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(plan_id)
        uow.plans.save(plan.model_copy(update={"state": state}))
        uow.events.append("bench_state", {"to": state.value}, plan_id=plan_id)
        uow.commit()


async def _plan(store: Store, plan_id: str) -> tuple[float, float, float, float, float, float]:
    start = time.perf_counter()
    app = AgentsApp(store, plan_id=plan_id, poll_seconds=None, user="bench")
    async with app.run_test(size=SIZE) as pilot:
        while not (
            isinstance(app.screen, PlanScreen) and app.screen.query_one(DecisionTree).row_count
        ):
            await pilot.pause()
        first_paint = time.perf_counter() - start
        while not app.screen.query_one(DecisionDetail).text.strip():
            await pilot.pause()
        with_details = time.perf_counter() - start
        await _settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        every = _ids(tree)
        modal_full = await _modal_shown(app, _bench_impact(plan_id, every), tree)
        modal_one = await _modal_shown(app, _bench_impact(plan_id, every[:1]), tree)
        tree = app.screen.query_one(DecisionTree)
        move = await _move_to_frame(app, tree)
        await _settle(app, pilot)
        t0 = time.perf_counter()
        tree.action_cursor_down()
        await _settle(app, pilot)
        move_details = time.perf_counter() - t0
    return first_paint, move, move_details, with_details, modal_full, modal_one


def _ids(tree: DecisionTree) -> list[str]:
    """Every decision the tree holds."""
    return list(tree._rows)


def _bench_impact(plan_id: str, affected: list[str]) -> Impact:
    """A revert's preview as the engine returns it, affecting ``affected``."""
    return Impact(
        plan_id=plan_id,
        plan_version=1,
        attempt=1,
        decision_id=affected[0],
        decision_phase=Phase.EXECUTE,
        step_key="step",
        mode=CorrectionMode.REVERT,
        guidance="bench",
        tier=Tier.FULL,
        affected_decisions=tuple(affected),
        children=(),
        rollbackable=(),
        non_rollbackable=(),
        unaffected=(),
        irreversible=(),
        phase_change=None,
    )


async def _modal_shown(app: AgentsApp, impact: Impact, tree: DecisionTree) -> float:
    """Seconds from the preview's result to the impact modal's first frame, as the plan
    screen does it: highlight the affected decisions, push the modal naming them."""
    framed = asyncio.Event()
    display = app._display

    def spy(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        if renderable is not None and isinstance(app.screen, ImpactModal):
            framed.set()

    app._display = spy  # type: ignore[method-assign]
    try:
        start = time.perf_counter()
        tree.highlight(impact.affected_decisions)
        app.push_screen(ImpactModal(impact, tree.row))
        await framed.wait()
        shown = time.perf_counter() - start
    finally:
        app._display = display  # type: ignore[method-assign]
    app.pop_screen()
    tree.highlight(())
    return shown


def run(quick: bool) -> list[Measurement]:
    count = 2_000 if quick else 10_000
    repeat = 2 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        plan_id = build_plan(db, count)
        store = Store.open(str(db))
        try:
            asyncio.run(_plan(store, plan_id))  # warm imports and caches
            runs = [asyncio.run(_plan(store, plan_id)) for _ in range(repeat)]
            gap = min(asyncio.run(_gap_while_store_changes(store, plan_id)) for _ in range(2))
        finally:
            store.close()
    empty = min(asyncio.run(_empty_paint()) for _ in range(repeat))
    small = min(asyncio.run(_small_move()) for _ in range(repeat))
    paint = min(r[0] for r in runs)
    move = min(r[1] for r in runs)
    details = min(r[2] for r in runs)
    painted = min(r[3] for r in runs)
    modal = min(r[4] for r in runs)
    modal_one = min(r[5] for r in runs)
    idle = min(asyncio.run(_idle_gap()) for _ in range(repeat))
    return [
        Measurement(
            "tui",
            f"longest event-loop gap, {count:,}-decision plan, store changed 5 times",
            gap,
            "longest gap of an empty app's loop",
            idle,
            "< 50 ms",
            gap < 0.05,
        ),
        Measurement(
            "tui",
            f"open a plan of {count:,} decisions to a painted tree",
            paint,
            "empty Textual app, first paint",
            empty,
            "< 1 s",
            paint < 1.0,
        ),
        Measurement(
            "tui",
            f"open a plan of {count:,} decisions to a painted tree and its details",
            painted,
            "empty Textual app, first paint",
            empty,
            "≤ 1.5×",
            painted <= 1.5 * empty,
        ),
        Measurement(
            "tui",
            f"preview → impact modal shown, all {count:,} decisions affected",
            modal,
            "the same modal, one decision affected",
            modal_one,
            "< 100 ms",
            modal < 0.1,
        ),
        Measurement(
            "tui",
            f"one cursor move in the {count:,}-decision tree, to its frame",
            move,
            "cursor move in a 10-node Tree, to its frame",
            small,
            "< 50 ms",
            move < 0.05,
        ),
        Measurement(
            "tui",
            "one cursor move, details loaded (worker)",
            details,
            "cursor move in a 10-node Tree",
            small,
            "(context)",
            None,
        ),
    ]
