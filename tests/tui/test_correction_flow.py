"""The main flow, as a user drives it: open the demo plan, select an Execute decision,
correct it with guidance, confirm the warnings, watch the replay finish, open the diff —
then check the engine's state in the store, not only the screen."""

from __future__ import annotations

import pytest

from cleveragents_tui.domain.enums import CorrectionStatus, DecisionType, PlanState
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.screens.diff import DiffScreen
from cleveragents_tui.tui.screens.plan_list import PlanListScreen
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_detail import DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio

RECORD = "A row in the releases table"


async def test_open_correct_confirm_replay_and_diff(demo_plan: DemoPlan) -> None:
    app = demo_plan.app()
    target = demo_plan.decision(RECORD)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)  # the app reads the store in workers
        # the plan list: open the demo plan with Enter
        assert isinstance(app.screen, PlanListScreen)
        assert app.screen.selected_plan_id == demo_plan.plan.plan_id
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        tree = screen.query_one(DecisionTree)
        assert tree.row_count == 8

        # select the Execute decision that wrote the release row; its details load in a worker
        assert tree.reveal(target)
        await pilot.pause()  # the highlight message starts the details worker
        await app.workers.wait_for_complete()
        await pilot.pause()
        detail = screen.query_one(DecisionDetail).text
        assert "A row in the releases table" in detail
        assert "checkpoint group" in detail and "tool invocations" in detail

        # correct it: the dialog, then the impact preview with the affected decisions highlighted
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CorrectionDialog)
        await pilot.press(*"record rc1")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ImpactModal)
        impact = app.screen.impact
        assert target in impact.affected_decisions
        assert tree.affected == frozenset(impact.affected_decisions)
        # the step has one alternative: guidance cannot select it, so the user picks it
        assert app.screen.focused is not None and app.screen.focused.id == "alternatives"
        await pilot.press("1", "y")
        await pilot.pause()

        # each warning in a y/N modal, the focus on No
        assert impact.warnings
        for _ in impact.warnings:
            assert isinstance(app.screen, ConfirmModal)
            assert app.screen.focused is not None and app.screen.focused.id == "no"
            await pilot.press("y")
            await pilot.pause()
        assert tree.affected == frozenset()

        # the replay runs in a thread worker; wait for it, then open the diff
        replay = app.screen
        assert isinstance(replay, ReplayModal)
        assert replay.worker is not None
        await replay.worker.wait()  # only this worker: the dialog flow's worker awaits the modal
        await pilot.pause()
        assert replay.finished and replay.result is not None
        assert replay.result.correction.status is CorrectionStatus.SUCCEEDED
        log = "\n".join(replay.query_one("#replay-log").lines)  # type: ignore[attr-defined]
        assert f"correction {replay.result.correction.correction_id} finished (succeeded)" in log
        assert "rolled back: " in log and "hello-cli: rolled_back" in log
        assert "re-made record: A row in the releases table" in log
        # each re-made decision's calls under its line, once; no raw resource_written lines
        lines = log.splitlines()
        record = lines.index("re-made record: A row in the releases table")
        announce = lines.index("re-made announce: Notify #hello-cli")
        assert lines[record + 1 : announce + 2] == [
            "  ✓ local/run-sql: 1 row(s) affected",
            "re-made announce: Notify #hello-cli",
            "  ✓ local/notify: notified #hello-cli (appended to outbox.jsonl)",
        ]
        assert "resource_written" not in log
        assert replay.remade >= 1
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen)
        assert app.screen.loader is not None  # the diff loads in a thread worker
        await app.screen.loader.wait()
        await pilot.pause()
        diff = app.screen.diff
        assert diff is not None
        assert [r.decision_id for r in diff.superseded if r.decision_id == target] == [target]
        await pilot.press("v")  # side by side
        await pilot.pause()
        assert app.screen.side_by_side
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)

    # the engine's state, read from the store
    details = show_plan(demo_plan.store, demo_plan.plan.plan_id)
    assert details.summary.plan.attempt == 2
    [correction] = details.corrections
    assert correction.status is CorrectionStatus.SUCCEEDED
    assert correction.guidance == "record rc1" and correction.requested_by == "tester"
    assert correction.target_decision_id == target
    with demo_plan.store.unit_of_work() as uow:
        old = uow.decisions.get(target)
        assert old.superseded_by == correction.replacement_decision_id
        replacement = uow.decisions.get(old.superseded_by or "")
        assert replacement.decision_type is DecisionType.USER_INTERVENTION
        assert replacement.chosen_option == "record rc1"
        plan = uow.plans.get(demo_plan.plan.plan_id)
    assert plan.state is PlanState.AWAITING_APPROVAL  # replayed to the new attempt's Apply gate


async def test_answering_no_to_a_warning_changes_nothing(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    target = demo_plan.decision(RECORD)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        screen.query_one(DecisionTree).reveal(target)
        await pilot.press("c", *"record rc1", "enter")
        await pilot.pause()
        await pilot.press("1", "y")  # impact: take the one alternative, go on
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("enter")  # Enter on the focused No
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
    details = show_plan(demo_plan.store, demo_plan.plan.plan_id)
    assert details.corrections == [] and details.summary.plan.attempt == 1


async def test_a_refused_correction_is_reported_not_raised(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        root = next(iter(tree.root.children)).data
        assert root is not None and tree.row(root).decision_type == "prompt_definition"  # type: ignore[union-attr]
        tree.reveal(root)
        await pilot.press("c", *"[bold]x[/", "enter")  # markup-like text must not break anything
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        assert any("cannot be reverted" in n.message for n in app._notifications)
    assert show_plan(demo_plan.store, demo_plan.plan.plan_id).corrections == []
