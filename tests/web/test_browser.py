"""The main flow in a real Chromium, as a person drives it: log in with the printed URL,
open the demo plan from the list with the keyboard, walk the tree to an Execute decision,
correct it, confirm the warnings, watch the replay finish — reading the terminal the page
shows — then check the engine's state in the store, including who did it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

from cleveragents_tui.domain.approval import ApprovalAnswer
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.approvals import pending_approvals
from cleveragents_tui.engine.browse import show_plan
from cleveragents_tui.engine.correction import preview
from cleveragents_tui.web.credentials import add_user
from tests.web.browser import Terminal
from tests.web.conftest import Demo, Served, serve
from tests.web.flows import choose_append, confirm_impact, give_guidance

# Append a corrective child plan instead of the docs one: the spawned docs plan is cancelled
# (a warning to confirm) and its files rolled back. (A revert of the demo's Execute decisions
# would roll back its SQLite app database, whose savepoint lives in the process that ran the
# plan: from any other process, a browser tab included, that rollback fails; see the report.)
SPAWN = "Spawn a child plan for the user guide"
GUIDANCE = "no separate docs plan: a README section"


@pytest.fixture
def alice(demo: Demo) -> Iterator[tuple[Served, str]]:
    """A server with a users file: alice's own token, and no shared one."""
    users = demo.workdir / "team.users"
    token = add_user(users, "alice")
    for served in serve(demo, "--users", str(users)):
        yield served, token


def test_correct_a_decision_in_the_browser(
    demo: Demo, alice: tuple[Served, str], page: Page
) -> None:
    served, token = alice
    target, row = demo.decision(SPAWN)
    expected = preview(demo.store, target, CorrectionMode.APPEND, GUIDANCE)  # pure reading
    terminal = Terminal(page)

    terminal.open(served.login(token))
    assert page.url == served.base  # the token was swapped for a cookie and left the URL
    terminal.wait_for("2 of 2 plans", "add-greeting", "awaiting_approval")

    terminal.press("Enter")  # the demo plan is selected: open it
    with demo.store.unit_of_work() as uow:
        decisions = {d.decision_id: d for d in uow.decisions.for_plan(demo.plan_id)}
    root = min(decisions.values(), key=lambda d: d.sequence_number)
    terminal.wait_for("8 decisions", f"prompt_definition · strategize · #{root.sequence_number}")
    terminal.press(*["ArrowDown"] * row)  # from the root, down the tree to the spawn
    terminal.wait_for(f"subplan_spawn · strategize · #{decisions[target].sequence_number}")

    terminal.press("c")
    choose_append(terminal)
    give_guidance(terminal, GUIDANCE)
    terminal.wait_for("Impact preview", "append")
    confirm_impact(terminal, len(expected.warnings))
    screen = terminal.wait_for("Correction succeeded")
    assert "correction_finished" in screen

    details = show_plan(demo.store, demo.plan_id)
    [correction] = details.corrections
    assert correction.status is CorrectionStatus.SUCCEEDED
    assert correction.target_decision_id == target and correction.guidance == GUIDANCE
    assert correction.mode is CorrectionMode.APPEND
    assert correction.requested_by == "alice"  # the web user, from the users file
    assert details.summary.plan.attempt == 2


def test_approve_in_the_browser_records_the_web_session(
    demo: Demo, served: Served, page: Page
) -> None:
    [approval] = pending_approvals(demo.store, demo.plan_id)
    terminal = Terminal(page)
    terminal.open(served.login())
    terminal.wait_for("2 of 2 plans")
    terminal.press("a")
    screen = terminal.wait_for("1 pending", "answered as web:")
    user = re.search(r"answered as (web:[0-9a-f]{8})", screen)
    assert user is not None
    terminal.press("y")
    terminal.click("reason (optional)")
    terminal.type("looks right")
    terminal.wait_for("looks right")
    terminal.press("Enter")
    terminal.wait_for(f"approved as {user[1]}")

    with demo.store.unit_of_work() as uow:
        answered = uow.approvals.get(approval.approval_id)
    assert answered.answer is ApprovalAnswer.APPROVED
    assert answered.answered_by == user[1]
