"""The plan list fits the terminal's width: at 80 columns it never scrolls sideways (its
last columns were off screen), at 120 it shows every column, and its columns fill the
terminal's width (a 2-cell strip was left empty on the right)."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from cleveragents_tui.tui.screens.plan_columns import (
    ACTION_FLOOR,
    COLUMNS,
    LONG_DATE,
    SHORT_DATE,
    fit_columns,
)
from cleveragents_tui.tui.screens.plan_list import PlanListScreen
from tests.tui.conftest import DemoPlan, settle

pytestmark = pytest.mark.anyio

CONTENT = {"plan": 10, "action": 40, "phase": 7, "state": 17, "att": 1, "profile": 4}
CONTENT |= {"decisions": 3, "appr": 1}


def _fits(table: DataTable[object]) -> bool:
    return table.virtual_size.width <= table.scrollable_content_region.width


async def test_the_plan_list_fits_80_columns_and_shows_everything_at_120(
    demo_plan: DemoPlan,
) -> None:
    app = demo_plan.app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, PlanListScreen) and screen.fit is not None
        table = screen.query_one(DataTable)
        assert [c.label.plain for c in table.columns.values()] == list(COLUMNS)
        assert screen.fit.date_format == LONG_DATE
        assert _fits(table) and table.max_scroll_x == 0

        await pilot.resize_terminal(80, 24)  # the columns fit the new width
        await settle(app, pilot)
        labels = [c.label.plain for c in table.columns.values()]
        assert labels[:4] == ["plan", "action", "phase", "state"] and "appr" in labels
        assert "profile" not in labels  # a low-value column went
        assert _fits(table) and table.max_scroll_x == 0, (table.virtual_size, table.size)
        assert len(table.rows) == 2  # the demo plan and its child, still both listed

        await pilot.resize_terminal(120, 36)
        await settle(app, pilot)
        assert [c.label.plain for c in table.columns.values()] == list(COLUMNS)


def _filled(table: DataTable[object]) -> tuple[int, int, int]:
    """The table's width, what its cells and their padding take, and its content's width."""
    columns = sum(c.get_render_width(table) for c in table.columns.values())
    return table.region.width, columns, table.scrollable_content_region.width


@pytest.mark.parametrize("size", [(80, 24), (120, 36)])
async def test_the_columns_fill_the_terminals_width(
    demo_plan: DemoPlan, size: tuple[int, int]
) -> None:
    app = demo_plan.app()
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one(DataTable)
        assert _filled(table) == (size[0], size[0], size[0])
        action = table.columns[ColumnKey("action")]
        assert action.width > len(demo_plan.plan.action)  # it takes what the others leave
        assert table.max_scroll_x == 0


def test_columns_go_in_order_and_the_action_is_elided_first() -> None:
    whole = fit_columns(CONTENT, 200)
    assert whole.columns == COLUMNS and whole.width(CONTENT) == 131
    assert whole.action_width == 40 + 200 - 131  # the action takes the width left over
    short = fit_columns(CONTENT, 128)  # the year goes first, before any of the action
    assert short.columns == COLUMNS and short.date_format == SHORT_DATE
    assert short.action_width == 40 + 128 - 126
    elided = fit_columns(CONTENT, 110)  # then the action is elided, not a column dropped
    assert elided.columns == COLUMNS and elided.action_width == 24
    at_80 = fit_columns(CONTENT, 78)
    assert at_80.width(CONTENT, at_80.action_width) <= 78
    assert set(COLUMNS) - set(at_80.columns) == {"profile", "att", "updated"}
    assert at_80.labels["decisions"] == "dec" and at_80.action_width == 25
    tiny = fit_columns(CONTENT, 30)
    assert tiny.action_width == ACTION_FLOOR  # nothing else can go: the table scrolls then
