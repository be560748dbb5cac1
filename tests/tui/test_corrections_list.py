"""`C` on the plan screen: the plan's corrections as `agents plan show` lists them, newest
first; Enter on a failed one shows its decision and why it failed, on a finished one its
diff. Before, nothing in the app said that a correction had failed."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from cleveragents_tui import failpoints
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.tui.modals.pick import PickModal
from cleveragents_tui.tui.screens.diff import DiffScreen
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle, until_screen

pytestmark = pytest.mark.anyio


async def test_the_corrections_list_shows_a_failed_one_and_opens_a_finished_ones_diff(
    demo_plan: DemoPlan, monkeypatch: pytest.MonkeyPatch
) -> None:
    def correct(decision: str, guidance: str, by: str) -> CorrectionAttempt:
        impact = preview(demo_plan.store, decision, CorrectionMode.REVERT, guidance)
        return execute(
            demo_plan.store, impact, acknowledged=True, requested_by=by, options=demo_plan.options
        ).correction

    record = demo_plan.decision("A row in the releases table")
    done = correct(record, "record rc1", "ana")
    notify = demo_plan.decision("Notify #hello-cli")
    monkeypatch.setenv(failpoints.ENV_VAR, "record.decision@execute=raise")
    failpoints.reset()
    failed = correct(notify, "notify #releases", "bo")
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()
    assert (done.status, failed.status) == (CorrectionStatus.SUCCEEDED, CorrectionStatus.FAILED)

    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen)
        await pilot.press("C")
        await until_screen(app, pilot, PickModal)
        listed = app.screen.query_one(OptionList)
        lines = [str(listed.get_option_at_index(i).prompt) for i in range(listed.option_count)]
        assert lines[0].startswith(f"{failed.correction_id}  revert of {notify} · failed · ")
        assert "by bo: its replay failed: injected fault" in lines[0]
        assert lines[1].startswith(f"{done.correction_id}  revert of {record} · succeeded · ")
        assert len(lines) == 2

        await pilot.press("enter")  # the failed one: its decision, and why
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen)
        assert app.screen.query_one(DecisionTree).current == failed.replacement_decision_id
        said = [n.message for n in app._notifications]
        assert any(
            m.startswith(f"correction {failed.correction_id} failed: its replay failed: ")
            for m in said
        ), said

        await pilot.press("C")
        await until_screen(app, pilot, PickModal)
        await pilot.press("down", "enter")  # the finished one: its diff
        await settle(app, pilot)
        assert isinstance(app.screen, DiffScreen)
        assert app.screen.correction_id == done.correction_id
