"""A plan that cannot be replayed (the `agents demo-data` sample has no stored action): the
app's correction dialog says so up front and offers no preview; nothing is changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Static

from cleveragents_tui.domain.enums import DecisionType
from cleveragents_tui.engine.demo.demo_data import load_sample_plan
from cleveragents_tui.engine.read.browse import plan_tree, show_plan
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, settle

pytestmark = pytest.mark.anyio


async def test_the_dialog_says_the_sample_cannot_be_corrected_and_offers_no_preview(
    sqlite_store: Store, tmp_path: Path
) -> None:
    plan_id = load_sample_plan(sqlite_store)
    target = next(
        line.row.decision_id
        for line in plan_tree(sqlite_store, plan_id).lines
        if line.row.decision_type == DecisionType.IMPLEMENTATION_CHOICE.value
    )
    app = AgentsApp(
        sqlite_store,
        plan_id=plan_id,
        user="tester",
        run_options=RunOptions(sandbox_base=tmp_path / "sandboxes"),
        poll_seconds=None,
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.screen.query_one(DecisionTree).reveal(target)
        await pilot.press("c")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, CorrectionDialog)
        said = str(dialog.query_one("#correction-blocked", Static).render())
        assert "Cannot be corrected" in said and "no stored action" in said
        assert "`agents demo` builds one" in said
        assert dialog.query_one("#preview", Button).disabled
        await pilot.press(*"use argparse", "enter")  # Enter in the field does not submit
        await pilot.pause()
        assert app.screen is dialog
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
    details = show_plan(sqlite_store, plan_id)
    assert details.summary.plan.attempt == 2 and len(details.corrections) == 1  # as recorded
