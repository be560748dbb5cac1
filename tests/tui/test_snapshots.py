"""SVG snapshots (pytest-textual-snapshot) of the plan list, the tree, the impact modal and
the diff view, on fixed data (fixed ULIDs and timestamps) at a fixed terminal size."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, Phase, PlanState
from cleveragents_tui.engine.core.diff import CorrectionDiff
from cleveragents_tui.engine.core.file_diff import FileDiff, ResourceDiff
from cleveragents_tui.engine.correct.model import (
    ChildAction,
    ChildImpact,
    Impact,
    IrreversibleEffect,
    Tier,
)
from cleveragents_tui.engine.correct.preview import with_warnings
from cleveragents_tui.engine.read.browse import plan_tree
from cleveragents_tui.sandbox.base import Change, ChangeKind
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.screens.diff import DiffScreen
from tests.tui.conftest import settle as settle_app
from tests.tui.fixed_data import CHILD, PLAN, T0, build_fixed, uid

SIZE = (120, 32)


async def settle(pilot: Pilot[None]) -> None:
    """Until the screen's data and the selected decision's details are loaded and shown."""
    await settle_app(pilot.app, pilot)


def _app(store: Store, **kwargs: Any) -> AgentsApp:
    build_fixed(store)
    return AgentsApp(store, user="tester", poll_seconds=None, **kwargs)


def test_plan_list(snap_compare: Any, sqlite_store: Store) -> None:
    assert snap_compare(_app(sqlite_store), terminal_size=SIZE, run_before=settle)


def test_plan_at_80_by_24_in_the_light_theme(snap_compare: Any, sqlite_store: Store) -> None:
    """The smallest terminal the app supports: ? Help and q Quit still in the footer."""
    app = _app(sqlite_store, plan_id=PLAN, theme="light")
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)


def test_help(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    app = _app(sqlite_store, plan_id=PLAN)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_correction_dialog(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("down", "down", "down", "down")
        await settle(pilot)
        await pilot.press("c")  # its worker waits on the dialog: settle would wait forever
        for _ in range(100):
            if isinstance(pilot.app.screen, CorrectionDialog):
                break
            await pilot.pause()
        await pilot.press(*"use a Greeter class")

    app = _app(sqlite_store, plan_id=PLAN)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_approvals(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)

    app = _app(sqlite_store)
    escalation = Approval(
        approval_id=uid(1, "A"),
        plan_id=PLAN,
        decision_id=uid(9),
        kind=ApprovalKind.ESCALATION,
        question="Record release 1.1.0 in the app database?",
        details={"factors": {"risk": 0.4, "confidence": 0.62}, "threshold": 0.7},
        requested_at=T0,
    )
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.approvals.add(escalation)
        uow.commit()
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_decision_tree(snap_compare: Any, sqlite_store: Store) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("s")  # show the superseded branch too
        await pilot.press("down", "down")
        await settle(pilot)

    app = _app(sqlite_store, plan_id=PLAN)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def _impact() -> Impact:
    return with_warnings(
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


def test_replay_modal_after_a_refused_correction(snap_compare: Any, sqlite_store: Store) -> None:
    """The replay dialog once its correction has ended: the fixed plan's action cannot be
    replayed, so the engine refuses before anything changes and the dialog says why."""

    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        pilot.app.push_screen(ReplayModal(_impact()))
        await settle(pilot)

    app = _app(sqlite_store, plan_id=PLAN)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
