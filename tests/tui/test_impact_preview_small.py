"""The impact preview at the smallest terminal the app supports (80×24), driven as a user
does (issue 17): it names each decision the correction supersedes or re-makes, its body
scrolls, and its buttons stay on screen."""

from __future__ import annotations

import pytest
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Button, Input, Static

from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import DemoPlan, settle

pytestmark = pytest.mark.anyio

RECORD = "A row in the releases table"


async def test_the_preview_names_the_decisions_and_keeps_its_buttons_on_screen(
    demo_plan: DemoPlan,
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen)
        tree = app.screen.query_one(DecisionTree)
        assert tree.reveal(demo_plan.decision(RECORD))
        await settle(app, pilot)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CorrectionDialog)
        await pilot.press(*"record rc1", "enter")
        await pilot.pause()  # not settle: the dialog flow's worker awaits the modal
        modal = app.screen
        assert isinstance(modal, ImpactModal)

        text = modal.query_one("#impact-text", Static).content
        shown = getattr(text, "plain", str(text))
        for decision_id in modal.impact.affected_decisions:
            row = tree.row(decision_id)
            assert row is not None
            named = [line for line in shown.splitlines() if line.startswith(f"  {decision_id[:8]}")]
            assert any(row.chosen_option[:30] in line for line in named), row.chosen_option
        assert "re-made" in shown  # the later writer of the rolled-back resource

        body = modal.query_one("#impact-body", VerticalScroll)
        assert body.max_scroll_y > 0  # more than fits: it scrolls
        for button in modal.query(Button).results(Button):
            region = button.region
            assert region.y >= 0 and region.bottom <= 23  # above the footer's row
            x, y = map(int, region.center)  # the cell holding the centre
            assert app.screen.get_widget_at(x, y)[0] is button
        assert modal.focused is not None and modal.focused.id == "alternatives"


async def test_the_correction_dialog_keeps_its_buttons_on_screen_at_80_by_24(
    demo_plan: DemoPlan,
) -> None:
    """At 24 rows the dialog's fields lose their borders so Cancel and Preview impact show
    (they were cut off below the box); at a taller size the dialog keeps its borders."""
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("c")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, CorrectionDialog)
        buttons = dialog.query(Button).results(Button)
        assert [b.id for b in buttons] == ["cancel", "preview"]
        for button in dialog.query(Button).results(Button):
            x, y = map(int, button.region.center)  # the cell holding the centre
            assert button.region.bottom <= 23  # above the footer's row
            assert dialog.get_widget_at(x, y)[0] is button

        # a field without its border still stands out from the box it is in
        field = dialog.query_one("#guidance", Input)
        box = dialog.query_one(Vertical)
        assert field.compact and field.styles.background != box.styles.background

        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert not dialog.query_one("#preview", Button).compact
