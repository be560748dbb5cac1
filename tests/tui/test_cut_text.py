"""No text cut at the window's edge at 80×24 or 120×36: the impact preview's heading over
the alternatives (a Label as wide as its text, cut by the dialog), and an approval's details
(cut at 8 rows: its threshold never showed)."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Static

from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.screens.approvals import ApprovalsScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import DemoPlan, settle

pytestmark = pytest.mark.anyio

SIZES = [(80, 24), (120, 36)]


def _wholly_shown(app: App[None], widget: Widget) -> bool:
    """Every line of ``widget``'s text has a row, and the widget lies inside the region
    its containers show."""
    needed = widget.get_content_height(app.size, app.size, widget.content_size.width)
    geometry = app.screen.find_widget(widget)
    return widget.content_size.height >= needed and geometry.clip.contains_region(geometry.region)


@pytest.mark.parametrize("size", SIZES)
async def test_the_alternatives_heading_wraps_inside_the_impact_preview(
    demo_plan: DemoPlan, size: tuple[int, int]
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        app.screen.query_one(DecisionTree).reveal(demo_plan.decision("A row in the releases table"))
        await pilot.press("c", *"record rc1", "enter")
        while not isinstance(app.screen, ImpactModal):  # the preview is worked out in a thread
            await pilot.pause()
        await pilot.pause()
        heading = app.screen.query_one("#alternatives-heading", Static)
        assert "(select it, or press its number)" in str(heading.render())
        assert _wholly_shown(app, heading), (heading.region, app.screen.find_widget(heading))


@pytest.mark.parametrize("size", SIZES)
async def test_an_approvals_details_show_whole(demo_plan: DemoPlan, size: tuple[int, int]) -> None:
    app = demo_plan.app()
    async with app.run_test(size=size) as pilot:
        await _open_approvals(app, pilot)
        detail = app.screen.query_one("#approval-detail", Static)
        assert str(detail.render()).endswith("\nthreshold: 1")  # its last line
        assert "key:" not in str(detail.render())  # the engine's name of it (apply@1): not shown
        assert _wholly_shown(app, detail), (detail.region, detail.content_size)


@pytest.mark.parametrize("size", SIZES)
async def test_a_long_question_is_shown_whole_above_its_details(
    demo_plan: DemoPlan, size: tuple[int, int]
) -> None:
    """The table's column cuts a question at the window's edge (a chat model's escalation,
    a child plan that stopped); the details under it showed everything but the question."""
    question = (
        "The migration drops the column `legacy_email` that two reports still read; keep the "
        "column and write both for one release, or drop it now and fix the reports?"
    )
    with demo_plan.store.unit_of_work(write=True) as uow:
        uow.approvals.add(
            Approval(
                plan_id=demo_plan.plan.plan_id, kind=ApprovalKind.ESCALATION, question=question
            )
        )
        uow.commit()
    app = demo_plan.app()
    async with app.run_test(size=size) as pilot:
        await _open_approvals(app, pilot)
        screen = app.screen
        assert isinstance(screen, ApprovalsScreen)
        table = screen.query_one(DataTable)
        [row] = [i for i, a in enumerate(screen.approvals) if a.question == question]
        table.move_cursor(row=row)
        await pilot.pause()
        detail = app.screen.query_one("#approval-detail", Static)
        shown = " ".join(str(detail.render()).split())
        assert shown.startswith(question), shown
        assert f"plan {demo_plan.plan.plan_id}" in shown
        assert _wholly_shown(app, detail), (detail.region, detail.content_size)


async def _open_approvals(app: App[None], pilot: Pilot[None]) -> None:
    await settle(app, pilot)
    await pilot.press("a")
    await settle(app, pilot)
    assert isinstance(app.screen, ApprovalsScreen)
