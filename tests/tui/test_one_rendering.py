"""The CLI and the app show one rendering of each read model (issue 17,
cleveragents_tui/views): for the same decision of the demo plan, ``agents plan explain``
prints what the app's details panel shows, and ``agents plan correct --dry-run`` what its
impact preview shows, and ``agents plan diff`` heads with what its diff screen heads with —
the same sections and values, the context ref and the checkpoint group in both."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from textual.widgets import RadioButton, Static

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.screens.diff import DiffScreen
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_detail import DecisionDetail
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio

RECORD = "A row in the releases table"  # wrote a row: a checkpoint group, a tool invocation


def _agents(db: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


async def test_plan_explain_prints_what_the_details_panel_shows(
    demo_plan: DemoPlan, sqlite_url: str
) -> None:
    decision = demo_plan.decision(RECORD)
    printed = _agents(sqlite_url, "plan", "explain", decision)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen)
        assert app.screen.query_one(DecisionTree).reveal(decision)
        await settle(app, pilot)
        shown = app.screen.query_one(DecisionDetail).text

    assert shown.rstrip("\n") == printed.rstrip("\n")
    sections = [block.splitlines()[0] for block in printed.split("\n\n")]
    assert sections[2:] == [
        "downstream impact",
        "depends on",
        "context",
        "checkpoint group",
        "tool invocations",
    ]
    lines = printed.splitlines()
    context_ref = next(line for line in lines if line.startswith("  ref "))
    assert "context:" in context_ref  # the CLI's context ref, now in the app too
    group = lines[lines.index("checkpoint group") + 1]
    assert group.split()[1] == "committed"  # the app's checkpoint group, now in the CLI too
    assert f"chosen        {RECORD}" in lines


async def test_correct_dry_run_prints_what_the_impact_preview_shows(
    demo_plan: DemoPlan, sqlite_url: str
) -> None:
    decision = demo_plan.decision(RECORD)
    printed = _agents(
        sqlite_url,
        "plan",
        "correct",
        decision,
        "--mode=revert",
        "--guidance",
        "record rc1",
        "--dry-run",
    )
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, PlanScreen)
        assert app.screen.query_one(DecisionTree).reveal(decision)
        await settle(app, pilot)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CorrectionDialog)
        await pilot.press(*"record rc1", "enter")
        await pilot.pause()  # not settle: the dialog flow's worker awaits the modal
        modal = app.screen
        assert isinstance(modal, ImpactModal)
        content = modal.query_one("#impact-text", Static).content
        shown = getattr(content, "plain", str(content))
        buttons = [
            str(b.label) for b in modal.query("#alternatives RadioButton").results(RadioButton)
        ]

    blocks = printed.split("\n\n")
    # the app shows the alternatives as buttons to pick from, the CLI as a numbered list
    [alternatives] = [b for b in blocks if b.startswith("alternatives of step record\n")]
    assert [f"  {label}" for label in buttons] == alternatives.splitlines()[1:-1]
    # every other section, the same, in the same order; the CLI then prints the warnings
    assert printed.startswith(
        shown.replace("\n\nchild plans", f"\n\n{alternatives}\n\nchild plans")
    )
    titles = [block.splitlines()[0] for block in shown.split("\n\n")]
    assert titles[1:] == [
        "decisions superseded and re-made: 2",
        "child plans",
        "resources",
        "irreversible effects",
        "2 warnings to confirm",
    ]
    named = shown.split("\n\n")[1].splitlines()[1:]  # the superseded decisions, by name
    assert [line.split()[1:] for line in named] == [
        ["record", "A", "row", "in", "the", "releases", "table"],
        ["tool_invocation", "Notify", "#hello-cli"],
    ]


async def test_plan_diff_heads_with_what_the_diff_screen_shows(
    demo_plan: DemoPlan, sqlite_url: str
) -> None:
    target = demo_plan.decision(RECORD)
    impact = preview(demo_plan.store, target, CorrectionMode.REVERT, "record rc1", choose=1)
    done = execute(
        demo_plan.store, impact, acknowledged=True, requested_by="ana", options=demo_plan.options
    )
    correction = done.correction.correction_id
    printed = _agents(sqlite_url, "plan", "diff", "--correction", correction)
    app = demo_plan.app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await app.push_screen(DiffScreen(correction))
        await settle(app, pilot)
        content = app.screen.query_one("#diff-decisions", Static).content
        shown = getattr(content, "plain", str(content))

    assert "by ana" in shown and "guidance  record rc1" in shown
    assert "- tool_invocation: A row in the releases table" in shown
    assert printed.startswith(shown + "\n\n### ")  # then the files, each interface its own way


async def test_plan_tree_prints_the_heading_and_the_lines_the_app_shows(
    demo_plan: DemoPlan, sqlite_url: str
) -> None:
    printed = _agents(sqlite_url, "plan", "tree", demo_plan.plan.plan_id).splitlines()
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        rows = app.screen.query_one(PlanStatus).plain_text.splitlines()
        heading = " ".join(row for row in rows if not row.startswith("last: "))  # folded at " · "
        tree = app.screen.query_one(DecisionTree)
        labels: dict[str, str] = {}
        nodes = list(tree.root.children)
        while nodes:
            node = nodes.pop()
            labels[node.data or ""] = str(node.label)
            nodes.extend(node.children)

    assert heading == printed[0] + " · 1 approval pending"  # the app adds what waits
    assert "awaiting_approval · attempt 1" in heading and demo_plan.plan.plan_id in heading
    lines = {line.split("  ", 1)[0]: line for line in printed[1:] if line[:2] == "01"}
    assert lines.keys() == labels.keys() and len(labels) == 8
    for decision, label in labels.items():
        shown = label[2:]  # after the phase's letter (S, E, A), the app's own
        # the app's column cuts a long chosen option sooner: up to the cut, the same line
        assert lines[decision].endswith(shown) or (
            "…" in shown and shown.split("…")[0] in lines[decision]
        ), (lines[decision], label)
    assert any("  ⚑" in label for label in labels.values())  # its checkpoint marks too
