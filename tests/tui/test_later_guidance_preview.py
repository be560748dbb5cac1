"""The app's impact preview names the guidance of earlier corrections a revert carries
forward or drops (issue 20, item 5), and a dropped one is a warning to confirm."""

from __future__ import annotations

import pytest

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio

EARLIER = "run the suite twice"


def _correct_the_test_step(demo_plan: DemoPlan) -> None:
    target = demo_plan.decision("A unit test, then the whole suite")
    impact = preview(demo_plan.store, target, CorrectionMode.REVERT, EARLIER, choose=1)
    done = execute(
        demo_plan.store, impact, acknowledged=True, requested_by="ana", options=demo_plan.options
    )
    assert done.correction.status is CorrectionStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("chosen", "heading"),
    [
        ("hello_cli/greet.py with a hello() function", "carried forward"),
        ("A plain function registered in COMMANDS", "dropped (the revert supersedes them)"),
    ],
)
async def test_the_impact_dialog_names_the_earlier_guidance(
    demo_plan: DemoPlan, chosen: str, heading: str
) -> None:
    _correct_the_test_step(demo_plan)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen)
        app.screen.query_one(DecisionTree).reveal(demo_plan.decision(chosen))
        await pilot.press("c", *"do it again", "enter")
        await pilot.pause()
        assert isinstance(app.screen, ImpactModal)
        text = str(app.screen.query_one("#impact-text").render())
        assert f"guidance of earlier corrections {heading}" in text
        assert f"'{EARLIER}' (step test, correction " in text
        dropped = [w for w in app.screen.impact.warnings if "drops guidance" in w]
        await pilot.press("1", "y")
        await pilot.pause()
        if heading == "carried forward":
            assert not dropped
            return
        [warning] = dropped  # asked y/N like every warning
        while isinstance(app.screen, ConfirmModal) and app.screen.question != warning:
            await pilot.press("y")
            await pilot.pause()
        assert isinstance(app.screen, ConfirmModal) and EARLIER in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
