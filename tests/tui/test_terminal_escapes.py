"""The app shows decisions, guidance and titles with their escape sequences escaped: the
rendered screen never holds a raw ESC or C1 character (issue 21, item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cleveragents_tui.engine.demo.demo_data import SAMPLE_PLAN, load_sample_plan
from cleveragents_tui.engine.read.browse import plan_tree
from cleveragents_tui.resources import data_path
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.widgets.decision_detail import DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.cli.test_terminal_escapes import HOSTILE, RAW, _poison
from tests.tui.conftest import SIZE, settle

pytestmark = pytest.mark.anyio


def hostile_plan(store: Store, folder: Path) -> str:
    spec = yaml.safe_load(data_path(*SAMPLE_PLAN).read_text("utf-8"))
    _poison(spec)
    source = folder / "hostile.yaml"
    source.write_text(yaml.safe_dump(spec, allow_unicode=True), "utf-8")
    return load_sample_plan(store, source)


def assert_clean(shown: str) -> None:
    assert not RAW.findall(shown), f"raw control characters on screen: {RAW.findall(shown)!r}"


async def test_every_view_of_a_hostile_plan_shows_escapes_escaped(
    sqlite_store: Store, tmp_path: Path
) -> None:
    plan_id = hostile_plan(sqlite_store, tmp_path)
    poisoned = next(
        line.row.decision_id
        for line in plan_tree(sqlite_store, plan_id, show_superseded=True).lines
        if line.row.chosen_option.endswith(HOSTILE)
    )
    app = AgentsApp(sqlite_store, plan_id=plan_id, user="t", poll_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        tree = screen.query_one(DecisionTree)
        assert tree.reveal(poisoned)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        detail = screen.query_one(DecisionDetail).text
        assert "\\x1b]52;c;cHduZWQ=" in detail and "\\x9b31m" in detail  # shown, escaped
        assert_clean(detail)
        assert_clean(screen.query_one(PlanStatus).plain_text)
        assert_clean(app.export_screenshot())  # everything drawn: tree, details, status
        app.notify("failed: " + HOSTILE + " [bold]x[/]", title="t" + HOSTILE)
        await pilot.pause()
        assert_clean(app.export_screenshot())
        await pilot.press("escape")  # the plan list
        await pilot.pause()
        assert_clean(app.export_screenshot())
        await app.workers.wait_for_complete()
