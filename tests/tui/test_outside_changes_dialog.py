"""The app's revert and files edited by hand in a sandbox it rolls back (issue 20, item 2):
the impact preview lists them, a dialog after the warnings asks keep / discard / cancel
(the focus on Cancel), and the answer reaches the engine: kept files are on top of the
replay; a cancel changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from cleveragents_tui.domain.enums import CorrectionStatus
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.read.tui_queries import recent_events
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.outside import OutsideChangesModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio

IMPLEMENT = "hello_cli/greet.py with a hello() function"
EDIT = "\nEdited by hand while the plan waited.\n"


def _edit_by_hand(demo_plan: DemoPlan) -> Path:
    sandboxes = PlanSandboxes(
        demo_plan.store, demo_plan.plan.plan_id, demo_plan.options.sandbox_base
    )
    workdir = sandboxes.get(f"{demo_plan.env.namespace}/hello-cli").workdir
    assert workdir is not None
    with (workdir / "README.md").open("a", encoding="utf-8") as readme:
        readme.write(EDIT)
    return workdir


async def _to_the_question(demo_plan: DemoPlan, app: AgentsApp, pilot: Pilot[None]) -> None:
    """Correct the implementation choice up to the keep/discard question."""
    await settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, PlanScreen)
    screen.query_one(DecisionTree).reveal(demo_plan.decision(IMPLEMENT))
    await pilot.press("c", *"write it again", "enter")
    await pilot.pause()
    assert isinstance(app.screen, ImpactModal)
    text = str(app.screen.query_one("#impact-text").render())
    assert "changed outside the plan" in text and "README.md (modified)" in text
    await pilot.press("1", "y")
    await pilot.pause()
    while isinstance(app.screen, ConfirmModal):  # the warnings first, as before
        await pilot.press("y")
        await pilot.pause()
    assert isinstance(app.screen, OutsideChangesModal)
    assert app.screen.focused is not None and app.screen.focused.id == "cancel"


async def test_keep_in_the_dialog_keeps_the_edit_on_top_of_the_replay(
    demo_plan: DemoPlan,
) -> None:
    workdir = _edit_by_hand(demo_plan)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await _to_the_question(demo_plan, app, pilot)
        await pilot.press("k")
        await pilot.pause()
        replay = app.screen
        assert isinstance(replay, ReplayModal)
        assert replay.worker is not None
        await replay.worker.wait()
        await pilot.pause()
        assert replay.result is not None
        assert replay.result.correction.status is CorrectionStatus.SUCCEEDED
        log = "\n".join(replay.query_one("#replay-log").lines)  # type: ignore[attr-defined]
        assert "kept the files changed outside the plan" in log
    assert (workdir / "README.md").read_text("utf-8").endswith(EDIT)
    kinds = [e.kind for e in recent_events(demo_plan.store, demo_plan.plan.plan_id, limit=200)]
    assert "sandbox_changed_outside" in kinds and "outside_changes_kept" in kinds


async def test_cancel_in_the_dialog_changes_nothing(demo_plan: DemoPlan) -> None:
    workdir = _edit_by_hand(demo_plan)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await _to_the_question(demo_plan, app, pilot)
        await pilot.press("enter")  # Enter on the focused Cancel
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        assert any("nothing was changed" in n.message for n in app._notifications)
    details = show_plan(demo_plan.store, demo_plan.plan.plan_id)
    assert details.corrections == [] and details.summary.plan.attempt == 1
    assert (workdir / "README.md").read_text("utf-8").endswith(EDIT)
