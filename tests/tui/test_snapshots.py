"""SVG snapshots (pytest-textual-snapshot) of the plan list, the tree, the impact modal and
the diff view, on fixed data (fixed ULIDs and timestamps) at a fixed terminal size."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, Phase, PlanState
from cleveragents_tui.engine.browse import plan_tree
from cleveragents_tui.engine.correction import (
    ChildAction,
    ChildImpact,
    Impact,
    IrreversibleEffect,
    Tier,
    _with_warnings,
)
from cleveragents_tui.engine.diff import CorrectionDiff, FileDiff, ResourceDiff
from cleveragents_tui.sandbox.base import Change, ChangeKind
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.screens.diff import DiffScreen
from tests.tui.fixed_data import CHILD, PLAN, T0, build_fixed, uid

SIZE = (120, 32)


async def settle(pilot: Pilot[None]) -> None:
    """Let the highlight message start the details worker, wait for it, then for its message."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def _app(store: Store, **kwargs: Any) -> AgentsApp:
    build_fixed(store)
    return AgentsApp(store, user="tester", poll_seconds=None, **kwargs)


def test_plan_list(snap_compare: Any, sqlite_store: Store) -> None:
    assert snap_compare(_app(sqlite_store), terminal_size=SIZE)


def test_decision_tree(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("s")  # show the superseded branch too
        await pilot.press("down", "down")
        await settle(pilot)

    app = _app(sqlite_store, plan_id=PLAN)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def _impact() -> Impact:
    return _with_warnings(
        Impact(
            plan_id=PLAN,
            plan_version=3,
            attempt=2,
            decision_id=uid(9),
            decision_phase=Phase.EXECUTE,
            step_key="record",
            mode=CorrectionMode.REVERT,
            guidance="record 1.1.0 [final]",
            tier=Tier.FULL,
            affected_decisions=(uid(9),),
            children=(
                ChildImpact(
                    CHILD,
                    "demo/write-docs",
                    Phase.EXECUTE,
                    PlanState.COMPLETED,
                    ChildAction.CANCEL_AND_ROLL_BACK,
                ),
            ),
            rollbackable=("demo/app-db", "demo/hello-cli"),
            non_rollbackable=("demo/team-chat",),
            unaffected=("demo/docs",),
            irreversible=(IrreversibleEffect("local/notify", 1, ("sends a chat message",)),),
            phase_change=None,
        )
    )


def test_impact_modal(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        from cleveragents_tui.tui.widgets.decision_tree import DecisionTree

        pilot.app.screen.query_one(DecisionTree).highlight((uid(9),))
        pilot.app.push_screen(ImpactModal(_impact()))
        await pilot.pause()

    app = _app(sqlite_store, plan_id=PLAN)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def _diff() -> CorrectionDiff:
    correction = CorrectionAttempt(
        correction_id=uid(1, "C"),
        plan_id=PLAN,
        target_decision_id=uid(6),
        mode=CorrectionMode.REVERT,
        guidance="record rc1",
        attempt=2,
        status=CorrectionStatus.SUCCEEDED,
        requested_by="tester",
        created_at=T0,
        finished_at=T0,
    )
    old = 'def hello(name):\n    return f"Hello, {name}!"\n'
    new = 'class Greeter:\n    def hello(self, name):\n        return f"Hello, {name}!"\n'
    greet = FileDiff(Change("hello_cli/greet.py", ChangeKind.MODIFIED), old, new)
    binary = FileDiff(
        Change("hello_cli/logo.bin", ChangeKind.ADDED),
        None,
        None,
        "binary file: contents not shown (absent → 1,024 bytes)",
    )
    return CorrectionDiff(
        correction=correction,
        superseded=[],
        replacements=[],
        at_decision=[ResourceDiff("demo/hello-cli", "d" * 40, "e" * 40, [greet])],
        final=[
            ResourceDiff("demo/hello-cli", "a" * 40, "b" * 40, [greet, binary]),
            ResourceDiff(
                "demo/docs",
                "c" * 12,
                "",
                note="the new attempt's state could not be recorded: the sandbox was discarded",
            ),
        ],
    )


def test_diff_view(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        tree = plan_tree(sqlite_store, PLAN, show_superseded=True)
        rows = {line.row.decision_id: line.row for line in tree.lines}
        diff = _diff()
        diff.superseded.extend([rows[uid(6)], rows[uid(7)]])
        diff.replacements.append(rows[uid(8)])
        pilot.app.push_screen(DiffScreen(diff.correction.correction_id, diff=diff))
        await pilot.pause()

    assert snap_compare(_app(sqlite_store), terminal_size=SIZE, run_before=run_before)


def test_diff_view_side_by_side(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        pilot.app.push_screen(DiffScreen(uid(1, "C"), diff=_diff()))
        await pilot.pause()
        await pilot.press("v")

    assert snap_compare(_app(sqlite_store), terminal_size=SIZE, run_before=run_before)
