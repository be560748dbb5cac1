"""The app, headless: open a plan of 10,000 decisions to a first painted tree, and one cursor
move in it: from the key's action to the next frame the app composes (the details of the
decision, loaded by a worker, are reported separately).

Baselines measured in the same run: an empty Textual app's first paint, and a cursor move in
a plain 10-node Textual ``Tree`` timed the same way.

Why not ``pilot.pause()``: it waits for the app to be idle for a while, which adds a floor of
about 40 ms to any measurement; the frame is composed long before that. Opening a plan is
timed to the first frame showing its tree, and to the first showing the first decision's
details too (each frame the app composes is checked; a pause would also wait for the rest
of the tree to be read).

Each figure is also given in the event loop's CPU time (``time.thread_time()`` of its
thread): on the shared two-core machines a load average of 10 stretches a wall time by 2-5×,
the loop's CPU time hardly moves. The empty app's first paint is Textual's start (driver,
stylesheet, one ``Static`` composed, one frame); the plan's adds reading the store and
composing the header, status, tree, details and footer.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static, Tree
from textual.worker import WorkerCancelled

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType, Phase, PlanState
from cleveragents_tui.engine.correct.model import Impact
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.impact import ImpactModal, impact_text
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_detail import PLACEHOLDER, DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.benchmarks.bench_plan_tree import build_plan
from tests.benchmarks.harness import Measurement
from tests.support.impacts import revert_impact

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


Timed = tuple[float, float]  # (wall seconds, the event loop's CPU seconds)


def _since(wall: float, cpu: float) -> Timed:
    return time.perf_counter() - wall, time.thread_time() - cpu


async def _empty_paint() -> Timed:
    wall, cpu = time.perf_counter(), time.thread_time()
    async with EmptyApp().run_test(size=SIZE) as pilot:
        await pilot.pause()
        return _since(wall, cpu)


async def _move_to_frame(app: App[None], tree: Tree[str] | Tree[None]) -> Timed:
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
        wall, cpu = time.perf_counter(), time.thread_time()
        tree.action_cursor_down()  # the key's action, without the Pilot's own key simulation
        await framed.wait()
        return _since(wall, cpu)
    finally:
        app._display = display  # type: ignore[method-assign]


async def _small_move() -> Timed:
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
    press would have waited; and the most CPU time the loop spent between two ticks (the
    same gap without what the machine's load and other threads added)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_cpu = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            before, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, time.perf_counter() - before - 0.001)
            self.longest_cpu = max(self.longest_cpu, time.thread_time() - cpu)

    def __enter__(self) -> _GapMeter:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def _idle_gap() -> Timed:
    """The baseline: the longest gap of an empty app's loop over the same number of polls."""
    async with EmptyApp().run_test(size=SIZE) as pilot:
        await pilot.pause()
        with _GapMeter() as meter:
            for _ in range(5):
                await pilot.pause()
        return meter.longest, meter.longest_cpu


async def _gap_while_store_changes(store: Store, plan_id: str, grow: bool) -> Timed:
    """Open the plan, then five times: another process pauses or resumes it (``grow``: and
    records a decision, which the screen reads and adds to its tree and influence graph),
    the poll notices, the screen reloads (the tree patched in place); the longest event-loop
    gap over all of it."""
    with store.unit_of_work() as uow:
        rows = uow.decisions.tree_rows(plan_id, include_superseded=True)
    ids = [row.decision_id for row in rows]
    app = AgentsApp(store, plan_id=plan_id, poll_seconds=None, user="bench")
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        with _GapMeter() as meter:
            for n in range(5):
                _set_state(store, plan_id, PlanState.PAUSED if n % 2 else PlanState.RUNNING)
                if grow:
                    _add_decision(store, plan_id, ids)
                app.poll_store()
                await _settle(app, pilot)
        return meter.longest, meter.longest_cpu


def _add_decision(store: Store, plan_id: str, ids: list[str]) -> None:
    """What a running plan's next decision writes: one more under a random decision
    (``ids``: the plan's decisions, this one appended)."""
    decision = Decision(
        plan_id=plan_id,
        parent_decision_id=random.choice(ids),
        sequence_number=len(ids),
        decision_type=DecisionType.TOOL_INVOCATION,
        phase=Phase.EXECUTE,
        question="bench",
        chosen_option="one more",
    )
    ids.append(decision.decision_id)
    with store.unit_of_work(write=True) as uow:
        uow.decisions.add(decision)
        uow.commit()


def _set_state(store: Store, plan_id: str, state: PlanState) -> None:
    """What another process's pause or run writes (the bench plan has no action to run)."""
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(plan_id)
        uow.plans.save(plan.model_copy(update={"state": state}))
        uow.events.append("bench_state", {"to": state.value}, plan_id=plan_id)
        uow.commit()


async def _plan(store: Store, plan_id: str, count: int) -> dict[str, Timed]:
    """Open the plan: its first paint (the first decisions recorded), with the first
    decision's details, the whole tree; then the impact modal and cursor moves."""
    wall, cpu = time.perf_counter(), time.thread_time()
    app = AgentsApp(store, plan_id=plan_id, poll_seconds=None, user="bench")
    frames = _PlanFrames(app, wall, cpu)
    async with app.run_test(size=SIZE) as pilot:
        await frames.details.wait()
        first_paint, with_details = frames.first_paint, frames.with_details
        assert first_paint is not None  # set at the same frame as the details, or before
        while app.screen.query_one(DecisionTree).row_count < count:
            await pilot.pause()
        whole = _since(wall, cpu)
        await _settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        every = _ids(tree)
        modal_full = await _modal_shown(app, _bench_impact(plan_id, every), tree)
        modal_one = await _modal_shown(app, _bench_impact(plan_id, every[:1]), tree)
        await _settle(app, pilot)  # the plan repainted after the modal: not the move's
        tree = app.screen.query_one(DecisionTree)
        move = await _move_to_frame(app, tree)
        await _settle(app, pilot)
        wall, cpu = time.perf_counter(), time.thread_time()
        tree.action_cursor_down()
        await _settle(app, pilot)
        move_details = _since(wall, cpu)
    return {
        "paint": first_paint,
        "details": with_details,
        "whole": whole,
        "move": move,
        "move_details": move_details,
        "modal": modal_full,
        "modal_one": modal_one,
    }


class _PlanFrames:
    """The times of the first frame showing the plan's tree, and of the first showing the
    first decision's details too (checked at each frame the app composes: waiting with
    ``pilot.pause()`` also waits for the rest of the tree to load)."""

    def __init__(self, app: AgentsApp, wall: float, cpu: float) -> None:
        self.first_paint: Timed | None = None
        self.with_details: Timed = (0.0, 0.0)
        self.details = asyncio.Event()
        self._app, self._start, self._display = app, (wall, cpu), app._display
        app._display = self._spy  # type: ignore[method-assign]

    def _spy(self, screen: Any, renderable: Any) -> None:
        self._display(screen, renderable)
        if renderable is None or not isinstance(screen, PlanScreen):
            return
        if self.first_paint is None and screen.query_one(DecisionTree).row_count:
            self.first_paint = _since(*self._start)
        if self.first_paint and screen.query_one(DecisionDetail).text not in ("", PLACEHOLDER):
            self.with_details = _since(*self._start)
            self._app._display = self._display  # type: ignore[method-assign]
            self.details.set()


def _ids(tree: DecisionTree) -> list[str]:
    """Every decision the tree holds."""
    return list(tree._rows)


def _bench_impact(plan_id: str, affected: list[str]) -> Impact:
    """A revert's preview as the engine returns it, affecting ``affected``."""
    return revert_impact(plan_id, affected, phase=Phase.EXECUTE, step_key="step", guidance="bench")


async def _modal_shown(app: AgentsApp, impact: Impact, tree: DecisionTree) -> Timed:
    """Seconds from the preview's result to the impact modal's first frame, as the plan
    screen does it: highlight the affected decisions, push the modal with its text (the
    affected decisions named and sorted in the preview's worker, as the screen does)."""
    text = await asyncio.to_thread(impact_text, impact, tree.index.rows.get)
    framed = asyncio.Event()
    display = app._display

    def spy(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        if renderable is not None and isinstance(app.screen, ImpactModal):
            framed.set()

    app._display = spy  # type: ignore[method-assign]
    try:
        wall, cpu = time.perf_counter(), time.thread_time()
        tree.highlight(impact.affected_decisions)
        app.push_screen(ImpactModal(impact, text=text))
        await framed.wait()
        shown = _since(wall, cpu)
    finally:
        app._display = display  # type: ignore[method-assign]
    app.pop_screen()
    tree.highlight(())
    return shown


def _best(runs: list[dict[str, Timed]], key: str) -> Timed:
    """The fastest wall time and, apart, the least loop CPU of ``key`` over ``runs``."""
    return min(r[key][0] for r in runs), min(r[key][1] for r in runs)


def _ms(timed: Timed) -> str:
    return f"{timed[0] * 1000:.0f} ms, loop CPU {timed[1] * 1000:.0f} ms"


def run(quick: bool) -> list[Measurement]:
    count = 2_000 if quick else 10_000
    repeat = 2 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        plan_id = build_plan(db, count)
        store = Store.open(str(db))
        try:
            asyncio.run(_plan(store, plan_id, count))  # warm imports and caches
            runs = [asyncio.run(_plan(store, plan_id, count)) for _ in range(repeat)]
            gaps = [
                asyncio.run(_gap_while_store_changes(store, plan_id, False)) for _ in range(repeat)
            ]
            grown = [
                asyncio.run(_gap_while_store_changes(store, plan_id, True)) for _ in range(repeat)
            ]
        finally:
            store.close()
    empties = [asyncio.run(_empty_paint()) for _ in range(repeat)]
    empty = min(e[0] for e in empties), min(e[1] for e in empties)
    smalls = [asyncio.run(_small_move()) for _ in range(repeat)]
    small = min(m[0] for m in smalls), min(m[1] for m in smalls)
    idles = [asyncio.run(_idle_gap()) for _ in range(repeat)]
    idle = min(i[0] for i in idles), min(i[1] for i in idles)
    gap = min(g[0] for g in gaps), min(g[1] for g in gaps)
    grow = min(g[0] for g in grown), min(g[1] for g in grown)
    idle_median = statistics.median(i[0] for i in idles)
    medians: list[
        tuple[float | None, float | None]
    ] = [  # of the first two rows: the loop gaps, noisy under load
        (statistics.median(g[0] for g in gaps), idle_median),
        (statistics.median(g[0] for g in grown), idle_median),
    ]
    for what, timings in (("idle", idles), ("gap", gaps), ("grow", grown)):
        print(f"tui: every {what} run: " + "; ".join(_ms(t) for t in timings))
    paint, details, whole = _best(runs, "paint"), _best(runs, "details"), _best(runs, "whole")
    move, move_details = _best(runs, "move"), _best(runs, "move_details")
    modal, modal_one = _best(runs, "modal"), _best(runs, "modal_one")
    rows: list[tuple[str, Timed, str, Timed, str, bool | None]] = [
        (
            f"longest event-loop gap, {count:,}-decision plan, store changed 5 times",
            gap,
            "longest gap of an empty app's loop",
            idle,
            "< 50 ms",
            gap[0] < 0.05,
        ),
        (
            "the same, each change recording a decision (added to the tree shown)",
            grow,
            "longest gap of an empty app's loop",
            idle,
            "< 50 ms",
            grow[0] < 0.05,
        ),
        (
            f"open a plan of {count:,} decisions to a painted tree (its first decisions)",
            paint,
            "empty Textual app, first paint",
            empty,
            "(context)",
            None,
        ),
        (
            f"open a plan of {count:,} decisions to a painted tree and its details",
            details,
            "empty Textual app, first paint",
            empty,
            "≤ 1.5×",
            details[0] <= 1.5 * empty[0],
        ),
        (
            f"open a plan of {count:,} decisions to the whole tree",
            whole,
            "empty Textual app, first paint",
            empty,
            "(context)",
            None,
        ),
        (
            f"preview → impact modal shown, all {count:,} decisions affected",
            modal,
            "the same modal, one decision affected",
            modal_one,
            "< 100 ms",
            modal[0] < 0.1,
        ),
        (
            f"one cursor move in the {count:,}-decision tree, to its frame",
            move,
            "cursor move in a 10-node Tree, to its frame",
            small,
            "< 50 ms",
            move[0] < 0.05,
        ),
        (
            "one cursor move, details loaded (worker)",
            move_details,
            "cursor move in a 10-node Tree",
            small,
            "(context)",
            None,
        ),
    ]
    for name, timed, _, base, _, _ in rows:  # the loop's CPU beside each wall time
        print(f"tui: {name}: {_ms(timed)}; baseline {_ms(base)}")
    medians += [(None, None)] * (len(rows) - len(medians))
    return [
        Measurement(
            "tui",
            name,
            timed[0],
            baseline,
            base[0],
            target,
            met,
            *median,
        )
        for (name, timed, baseline, base, target, met), median in zip(rows, medians, strict=True)
    ]
