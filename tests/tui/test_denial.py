"""Denying in the app pauses the plan and offers what comes next; nothing is cancelled
unless the person picks that."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from textual.widgets import OptionList

from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.engine import answer_approval, pending_approvals
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.modals.denial import DenialModal
from cleveragents_tui.tui.screens.approvals import ApprovalsScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio


def _state(demo_plan: DemoPlan) -> PlanState:
    return show_plan(demo_plan.store, demo_plan.plan.plan_id).summary.plan.state


async def _deny_the_apply_gate(app, pilot) -> DenialModal:  # type: ignore[no-untyped-def]
    await settle(app, pilot)
    await pilot.press("a")  # the approvals queue
    await settle(app, pilot)
    assert isinstance(app.screen, ApprovalsScreen)
    await pilot.press("n", *"wrong greeting", "enter")
    for _ in range(20):  # the answer is recorded in a thread, then the choices open
        await pilot.pause()
        if isinstance(app.screen, DenialModal):
            break
    assert isinstance(app.screen, DenialModal)
    return app.screen


async def test_denying_the_apply_gate_pauses_and_escape_leaves_it_paused(
    demo_plan: DemoPlan,
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        modal = await _deny_the_apply_gate(app, pilot)
        labels = [str(o.prompt) for o in modal.query_one("#denial-choices").options]  # type: ignore[attr-defined]
        assert any("correct the decision whose result was wrong" in label for label in labels)
        assert any("cancel the plan" in label for label in labels)
        await pilot.press("escape")
        await pilot.pause()
    assert _state(demo_plan) is PlanState.PAUSED


async def test_after_denying_the_apply_gate_approving_it_after_all_lands_the_plan(
    demo_plan: DemoPlan,
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        modal = await _deny_the_apply_gate(app, pilot)
        choices = modal.query_one("#denial-choices")
        ids = [o.id for o in choices.options]  # type: ignore[attr-defined]
        choices.highlighted = ids.index("apply")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert _state(demo_plan) is PlanState.APPLIED


async def _choices_after_r(app, pilot) -> list[str]:  # type: ignore[no-untyped-def]
    """`R` on the plan, then the ids of the choices it offers."""
    await pilot.press("R")
    for _ in range(20):  # the denial is read in a thread, then the choices open
        await pilot.pause()
        if isinstance(app.screen, DenialModal):
            break
    assert isinstance(app.screen, DenialModal)
    ids = []
    for option in app.screen.query_one("#denial-choices", OptionList).options:
        assert option.id is not None  # each choice is offered with its id
        ids.append(option.id)
    return ids


async def _pick(app, pilot, ids: list[str], choice: str) -> None:  # type: ignore[no-untyped-def]
    app.screen.query_one("#denial-choices").highlighted = ids.index(choice)
    await pilot.press("enter")


async def test_r_on_a_plan_left_paused_on_a_denial_offers_its_choices_again(
    demo_plan: DemoPlan,
) -> None:
    """Esc left the plan paused; `R` on it asked the same question again, and the choices
    (correct, approve the Apply after all, cancel) were gone unless it was denied again."""
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await _deny_the_apply_gate(app, pilot)
        await pilot.press("escape")  # the plan stays paused
        await settle(app, pilot)
        await pilot.press("escape")  # back from the approvals to the plan
        await settle(app, pilot)
        ids = await _choices_after_r(app, pilot)
        assert {"correct", "apply", "cancel"} <= set(ids), ids
        await _pick(app, pilot, ids, "apply")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert _state(demo_plan) is PlanState.APPLIED


FAILING_TEST = """import unittest

from hello_cli.greet import hello


class HelloTest(unittest.TestCase):
    def test_greets_by_name(self) -> None:
        self.assertEqual(hello("Ada"), "Hi, Ada!")
"""


async def test_correcting_after_a_failed_calls_denial_selects_the_decision_that_made_it(
    tmp_path: Path, sqlite_store: Store, options: RunOptions
) -> None:
    """After denying a failed test run, "correct the decision that made the call" on the
    plan's screen selects that decision, so `c` corrects it; it only said "select the
    decision", in a tree of retries."""
    env = build_demo(sqlite_store, tmp_path / "demo")
    data = yaml.safe_load(env.action_file.read_text(encoding="utf-8"))
    [test] = [d for d in data["decisions"] if d["key"] == "test"]
    test["alternatives"][0]["tool_calls"][0]["arguments"]["content"] = FAILING_TEST
    env.action_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    plan = start_plan(
        sqlite_store, load_action(str(env.action_file)), profile_override="ci", options=options
    )
    [asked] = pending_approvals(sqlite_store, plan.plan_id)
    assert "local/run-tests failed" in asked.question and asked.decision_id is not None
    answer_approval(sqlite_store, asked.approval_id, approve=False, by="li", reason="wrong")
    demo = DemoPlan(sqlite_store, env, plan, options)
    app = demo.app(plan_id=plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        ids = await _choices_after_r(app, pilot)
        choices = app.screen.query_one("#denial-choices", OptionList)
        labels = [str(o.prompt) for o in choices.options]
        said = "correct the decision that made the call: selects it; then press c"
        assert labels[ids.index("correct")] == said, labels  # it is on this screen
        await _pick(app, pilot, ids, "correct")
        await settle(app, pilot)
        assert app.screen.query_one(DecisionTree).current == asked.decision_id
        said = [n.message for n in app._notifications][-1]
        assert said == "the decision that made the call is selected: press c to correct it"
    assert _state(demo) is PlanState.PAUSED  # nothing was run
