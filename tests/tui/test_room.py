"""The plan screen uses the room the window gives: the tree shows as much of each chosen
option as its pane has room for (cut to 30 characters only where it has not, so the numbers
after it stay in view), and the heading breaks between its parts, never inside one."""

from __future__ import annotations

import pytest
from rich.cells import cell_len
from rich.text import Text

from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus, _folded
from tests.tui.conftest import DemoPlan, settle

pytestmark = pytest.mark.anyio

OPTION = "Keep the public API of hello_cli unchanged"  # 42 characters, the demo's invariant


def _rows_drawn(widget: DecisionTree | PlanStatus) -> list[str]:
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (200, 40)])
async def test_the_tree_shows_as_much_of_an_option_as_its_pane_has_room_for(
    demo_plan: DemoPlan, size: tuple[int, int]
) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        tree = app.screen.query_one(DecisionTree)
        lines = _rows_drawn(tree)
        width = tree.scrollable_content_region.width
        assert all(len(line) <= width for line in lines), lines
        invariant = next(line for line in lines if "invariant_enforced" in line)
        whole = f"invariant_enforced: {OPTION}  (0.95)"
        if invariant.index("invariant_enforced") + len(whole) <= width:
            assert whole in invariant  # the whole option, and its numbers
        else:  # more than the 30 characters every pane shows, and the numbers still in view
            shown = invariant.split("invariant_enforced: ")[1].split("…")[0]
            assert len(shown) > 30 and OPTION.startswith(shown), invariant
            assert invariant.endswith("(0.95)"), invariant
        # a deeper line whose option is cut to fit keeps its numbers and ⚑ in view
        first_execute = next(line for line in lines if "implementation_choice" in line)
        assert first_execute.endswith("(0.80)  ⚑"), first_execute


@pytest.mark.parametrize("width", [50, 80, 120])
async def test_the_heading_breaks_between_its_parts(demo_plan: DemoPlan, width: int) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=(width, 30)) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen)
        status = app.screen.query_one(PlanStatus)
        rows = _rows_drawn(status)
        assert any("profile auto" in row for row in rows), rows  # "profile" / "auto" before
        assert any("attempt 1" in row for row in rows), rows
        heading = [row for row in rows if not row.lstrip().startswith("last:")]
        for row in heading[:-1]:
            if row.strip() and " pending" not in row:
                assert row.endswith("·"), rows  # each row but the last ends at a separator


def test_no_width_leaves_a_separator_alone_on_a_row() -> None:
    """At 80 columns a heading whose "profile trusted" just fit, and its " ·" did not, drew
    the "·" alone on the next row."""
    heading = Text(
        "local/proj-limited · execute · awaiting_approval · attempt 1 · profile trusted · "
        "plan 01M922WFW3MGJGTXQ2NGAD6K58"
    )
    for width in range(32, heading.cell_len + 1):
        rows = _folded(heading, width).plain.split("\n")
        assert all(cell_len(row) <= width for row in rows), (width, rows)
        assert all(row.endswith(" ·") for row in rows[:-1]), (width, rows)
        assert all(row.strip(" ·") for row in rows), (width, rows)
