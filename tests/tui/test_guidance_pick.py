"""Guidance that selects none of a decision's alternatives (issue 14, finding 3), in the app:
the impact preview says so and lists them; Correct is refused until one is picked; the
replay takes the one picked — in the tree and in the sandbox's files."""

from __future__ import annotations

import pytest
from textual import events
from textual.widgets import RadioButton, Static

from cleveragents_tui.domain.enums import CorrectionStatus
from cleveragents_tui.engine.core.sandboxes import sandbox_root
from cleveragents_tui.engine.read.browse import plan_tree
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio

STRATEGY = "A plain function registered in COMMANDS"
GREETER = "A greeter class with a configurable greeting"


async def test_a_single_alternative_is_offered_as_it_is(demo_plan: DemoPlan) -> None:
    """A point with one alternative: the preview asks to take that one anyway, not to pick
    "the one" of a list of one."""
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        target = demo_plan.decision("hello_cli/greet.py with a hello() function")
        app.screen.query_one(DecisionTree).reveal(target)
        await pilot.press("c", *"use a Greeter class", "enter")
        await pilot.pause()
        preview = app.screen
        assert isinstance(preview, ImpactModal)
        notice = str(preview.query_one("#impact-pick", Static).render())
        assert "same choice again. Select it to take it anyway." in notice
        assert "of strategy (" in notice  # and the decision whose alternative it names


async def test_the_alternative_picked_in_the_preview_is_what_the_replay_takes(
    demo_plan: DemoPlan,
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    target = demo_plan.decision(STRATEGY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        screen.query_one(DecisionTree).reveal(target)
        await pilot.press("c", *"make it easier to extend", "enter")
        await pilot.pause()
        preview = app.screen
        assert isinstance(preview, ImpactModal)
        labels = [
            str(b.label) for b in preview.query("#alternatives RadioButton").results(RadioButton)
        ]
        assert labels == [f"1. {STRATEGY}", f"2. {GREETER}"]
        assert not any(
            b.value for b in preview.query("#alternatives RadioButton").results(RadioButton)
        )
        notice = str(preview.query_one("#impact-pick", Static).render())
        assert "The guidance selects none of these" in notice

        await pilot.press("y")  # refused: nothing picked
        await pilot.pause()
        assert isinstance(app.screen, ImpactModal)  # still the preview
        assert "Pick the alternative to take first" in str(
            preview.query_one("#impact-pick", Static).render()
        )

        await pilot.press("2", "y")
        await pilot.pause()
        assert preview.impact.alternatives is not None
        assert preview.impact.alternatives.option == GREETER
        while isinstance(app.screen, ConfirmModal):  # the warnings
            await pilot.press("y")
            await pilot.pause()
        replay = app.screen
        assert isinstance(replay, ReplayModal) and replay.worker is not None
        await replay.worker.wait()
        await pilot.pause()
        assert replay.result is not None
        assert replay.result.correction.status is CorrectionStatus.SUCCEEDED

    current = {
        line.row.decision_type: line.row.chosen_option
        for line in plan_tree(demo_plan.store, demo_plan.plan.plan_id).lines
    }
    assert current["strategy_choice"] == GREETER
    assert current["implementation_choice"] == "hello_cli/greet.py with a Greeter class"
    assert demo_plan.options.sandbox_base is not None
    hello_cli = sandbox_root(
        demo_plan.options.sandbox_base,
        demo_plan.plan.plan_id,
        f"{demo_plan.env.namespace}/hello-cli",
    )
    greet = (hello_cli / "worktree" / "hello_cli" / "greet.py").read_text()
    assert "class Greeter:" in greet and "def hello(" not in greet


async def test_a_number_and_y_typed_at_once_correct_with_that_alternative(
    demo_plan: DemoPlan,
) -> None:
    """A browser sends keys without waiting for the app: the y right behind the number
    must find the alternative already picked (it was refused, and the preview stayed)."""
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    target = demo_plan.decision(STRATEGY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        screen.query_one(DecisionTree).reveal(target)
        await pilot.press("c", *"make it easier to extend", "enter")
        await pilot.pause()
        preview = app.screen
        assert isinstance(preview, ImpactModal)
        for key in ("2", "y"):  # queued together, as a browser's keystrokes arrive
            app.post_message(events.Key(key, key))
        await pilot.pause()
        assert not isinstance(app.screen, ImpactModal)  # it went on to the warnings
        assert preview.impact.alternatives is not None
        assert preview.impact.alternatives.option == GREETER
