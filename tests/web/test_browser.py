"""The main flow in a real Chromium, as a person drives it: log in with the printed URL, open
the plan from the list with the keyboard and run it, walk the tree to an Execute decision,
correct it, confirm the warnings, watch the replay finish — reading the terminal the page
shows — then check the engine's state in the store, including who did it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from cleveragents_tui.domain.approval import ApprovalAnswer
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, DecisionType
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.approvals import pending_approvals
from cleveragents_tui.web.credentials import add_user
from tests.web.browser import Terminal
from tests.web.conftest import Demo, Served, make_demo, serve
from tests.web.flows import confirm_impact, give_guidance

# The announcement: reverting it rolls back the repository and the app database, and warns
# twice (the team chat cannot be rolled back; the notification was irreversible). The tab
# runs the plan (R) itself, as a user would; a plan another live process ran could be
# corrected too (that process hands the app database's sandbox over when its run ends:
# tests/e2e/test_correction_concurrency.py).
NOTIFY = "Notify #hello-cli"
GUIDANCE = "announce it in #releases"


@pytest.fixture
def created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Demo]:
    """The demo plan, created but not run."""
    yield from make_demo(str(tmp_path / "agents.db"), tmp_path, monkeypatch, run=False)


@pytest.fixture
def alice(created: Demo) -> Iterator[tuple[Served, str]]:
    """A server with a users file: alice's own token, and no shared one."""
    users = created.workdir / "team.users"
    token = add_user(users, "alice")
    for served in serve(created, "--users", str(users)):
        yield served, token


def test_run_and_correct_a_plan_in_the_browser(
    created: Demo, alice: tuple[Served, str], page: Page
) -> None:
    demo, (served, token) = created, alice
    terminal = Terminal(page)

    terminal.open(served.login(token))
    assert page.url == served.base  # the token was swapped for a cookie and left the URL
    terminal.wait_for("1 of 1 plans", "add-greeting", "created")
    terminal.press("Enter")  # the only plan is selected: open it
    terminal.wait_for("0 decisions")
    terminal.press("R")  # run it, in this tab's process
    terminal.wait_for("8 decisions", "awaiting_approval", "· strategize · #0")  # root

    target, row = demo.decision(NOTIFY)
    expected = preview(demo.store, target, CorrectionMode.REVERT, GUIDANCE)  # pure reading
    assert len(expected.warnings) == 2
    terminal.press(*["ArrowDown"] * row)  # from the root, down the tree to the announcement
    terminal.wait_for(f"decision {target}")  # its details (the heading may wrap)
    terminal.press("c")  # revert is the default mode
    give_guidance(terminal, GUIDANCE)
    terminal.wait_for("Impact preview", "demo-")  # resources listed
    confirm_impact(terminal, len(expected.warnings))
    screen = terminal.wait_for("Correction succeeded")
    assert "finished (succeeded)" in screen and "rolled_back" in screen

    details = show_plan(demo.store, demo.plan_id)
    [correction] = details.corrections
    assert correction.status is CorrectionStatus.SUCCEEDED
    assert correction.mode is CorrectionMode.REVERT
    assert correction.target_decision_id == target and correction.guidance == GUIDANCE
    assert correction.requested_by == "alice"  # the web user, from the users file
    assert details.summary.plan.attempt == 2
    with demo.store.unit_of_work() as uow:
        replaced = uow.decisions.get(target)
        assert replaced.superseded_by == correction.replacement_decision_id
        guidance = uow.decisions.get(replaced.superseded_by or "")
    assert guidance.decision_type is DecisionType.USER_INTERVENTION
    assert guidance.chosen_option == GUIDANCE


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
