"""Finding things in a plan: `/` search by text or id prefix, `j` into the child plan a
decision spawned and esc back, `y` to copy an id, and status lines a person can read."""

from __future__ import annotations

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.setup.config import app_theme, set_setting
from cleveragents_tui.tui.modals.reason import ReasonModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio


async def test_slash_finds_by_text_then_the_next_match_then_by_id(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    row = demo_plan.decision("A row in the releases table")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        await pilot.press("slash")
        await pilot.pause()
        assert isinstance(app.screen, ReasonModal)
        await pilot.press(*"releases", "enter")
        await settle(app, pilot)
        assert tree.current == row
        await pilot.press("slash", "enter")  # the same text again: the next match, wrapping
        await settle(app, pilot)
        assert tree.current == row  # only one decision mentions it
        await pilot.press("slash", *"tool_invocation", "enter")
        await settle(app, pilot)
        first = tree.current
        await pilot.press("slash", "enter")
        await settle(app, pilot)
        assert first is not None and tree.current not in (None, first)
        announce = demo_plan.decision("Notify #hello-cli")
        await pilot.press("slash", "ctrl+u", *announce[:14].lower(), "enter")  # an id prefix
        await settle(app, pilot)
        assert tree.current == announce
        await pilot.press("slash", "ctrl+u", *"no such thing", "enter")
        await settle(app, pilot)
        assert tree.current == announce
        assert any("no decision matches" in n.message for n in app._notifications)


async def test_j_opens_the_spawned_child_plan_and_escape_comes_back(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    spawn = demo_plan.decision("Spawn a child plan for the user guide")
    with demo_plan.store.unit_of_work() as uow:
        [child] = uow.plans.children(demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        parent_screen = app.screen
        parent_screen.query_one(DecisionTree).reveal(spawn)
        await pilot.press("j")
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen) and app.screen.plan_id == child.plan_id
        assert app.screen.query_one(DecisionTree).row_count > 0
        # esc leads back to the parent plan, so the footer must not promise the plan list
        [back] = [k for k in app.screen.query_one(Footer).query(FooterKey) if k.key == "escape"]
        assert back.description == "Back"
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.screen is parent_screen
        parent_screen.query_one(DecisionTree).reveal(demo_plan.decision("Notify #hello-cli"))
        await pilot.press("j")
        await settle(app, pilot)
        assert app.screen is parent_screen
        assert any("spawned no child plan" in n.message for n in app._notifications)


async def test_y_copies_the_decision_id(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        await pilot.press("down", "y")
        await pilot.pause()
        assert tree.current is not None and app.clipboard == tree.current


async def test_the_status_line_is_words_not_a_python_repr(demo_plan: DemoPlan) -> None:
    with demo_plan.store.unit_of_work(write=True) as uow:
        uow.events.append(  # a kind with no words of its own (a later version's): its fields
            "a_later_kind",
            {"paths": ["a.py", "b.py"], "factors": {"risk": 0.4}},
            plan_id=demo_plan.plan.plan_id,
        )
        uow.commit()
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        status = app.screen.query_one(PlanStatus).plain_text
        [now] = [line for line in status.splitlines() if line.startswith("last:")]
        assert "paths a.py, b.py" in now and "factors risk 0.4" in now
        assert not any(c in now for c in "[]{}'")


async def test_the_now_line_uses_the_width_it_has(demo_plan: DemoPlan) -> None:
    """ "What it is doing now" was cut at 70 characters in any window: now at the bar's
    width, whole in a wide one, one row in an 80-column one."""
    with demo_plan.store.unit_of_work(write=True) as uow:
        uow.events.append(
            "resource_written",
            {"resource": "demo/hello-cli", "path": "hello_cli/greet.py", "by": "implement-class"},
            plan_id=demo_plan.plan.plan_id,
        )
        uow.commit()
    for size in (SIZE, (80, 24)):
        app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            status = app.screen.query_one(PlanStatus)
            [now] = [line for line in status.plain_text.splitlines() if line.startswith("last:")]
            if size == SIZE:
                assert now.endswith("resource demo/hello-cli)"), now
            else:
                assert now.endswith("…") and len(now) <= status.content_size.width, now


async def test_the_theme_is_kept_for_the_next_run(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(theme=app_theme(demo_plan.store))
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.current_theme.dark
        await pilot.press("t")
        await settle(app, pilot)
        assert not app.current_theme.dark
    assert app_theme(demo_plan.store) == "light"
    again = demo_plan.app(theme=app_theme(demo_plan.store))
    async with again.run_test(size=SIZE) as pilot:
        await settle(again, pilot)
        assert not again.current_theme.dark
    with pytest.raises(UserError, match="use one of: dark, light"):
        set_setting(demo_plan.store, "tui.theme", "purple")
    assert app_theme(demo_plan.store) == "light"


async def test_ctrl_c_says_which_key_quits_in_words(demo_plan: DemoPlan) -> None:
    """Ctrl+C does not quit a Textual app; its note said ``Press [b]q[/b] ...`` as written,
    because this app never renders markup in notifications."""
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["Press q to quit the app"]
        assert app.is_running
