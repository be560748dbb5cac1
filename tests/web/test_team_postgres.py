"""A team on PostgreSQL: alice and bob each in their own browser on one ``agents serve``.
Alice's correction shows up on bob's screen (the app polls the store), and while a
correction runs, bob's attempt at another is told the plan is busy."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.correct.execute import take_plan
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.web.credentials import add_user
from tests.web.browser import Terminal
from tests.web.conftest import Demo, Served, make_demo, serve
from tests.web.flows import choose_append, confirm_impact, give_guidance

pytestmark = pytest.mark.postgres

SPAWN = "Spawn a child plan for the user guide"


@pytest.fixture
def team_demo(postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Demo]:
    yield from make_demo(postgres_url, tmp_path, monkeypatch)


def open_plan(page: Page, served: Served, token: str) -> Terminal:
    terminal = Terminal(page)
    terminal.open(served.login(token))
    terminal.wait_for("add-greeting")
    terminal.press("Enter")
    terminal.wait_for("8 decisions", "· strategize · #0")  # root's details
    return terminal


def correct_spawn(terminal: Terminal, demo: Demo, guidance: str) -> None:
    """From the root: down to the spawn decision, correct it (append), confirm everything."""
    target, row = demo.decision(SPAWN)
    warnings = len(preview(demo.store, target, CorrectionMode.APPEND, guidance).warnings)
    terminal.press(*["ArrowDown"] * row)
    terminal.wait_for(f"decision {target}")  # its details (the heading may wrap)
    terminal.press("c")
    choose_append(terminal)
    give_guidance(terminal, guidance)
    confirm_impact(terminal, warnings)


def test_two_browsers_share_the_plan_and_see_it_busy(
    team_demo: Demo, new_page: Callable[[], Page]
) -> None:
    demo = team_demo
    users = demo.workdir / "team.users"
    tokens = {name: add_user(users, name) for name in ("alice", "bob")}
    for served in serve(demo, "--users", str(users)):
        alice = open_plan(new_page(), served, tokens["alice"])
        bob = open_plan(new_page(), served, tokens["bob"])
        bob.wait_for("attempt 1")

        correct_spawn(alice, demo, "a README section instead")
        alice.wait_for("Correction succeeded")
        # bob did nothing: his app polls. (His status line's last event is not
        # correction_finished: after an append the plan goes on to its new attempt's gates.)
        bob.wait_for("attempt 2")

        # someone else's correction takes the plan (it runs until the end of this test)
        target, _ = demo.decision(SPAWN)
        running = take_plan(
            demo.store, preview(demo.store, target, CorrectionMode.APPEND, "later"), "carol"
        )
        bob.wait_for("correction_started by carol")
        correct_spawn(bob, demo, "no docs at all")
        screen = bob.wait_for("Correction failed", "is busy")
        assert running.correction_id in screen

    corrections = {c.requested_by: c for c in show_plan(demo.store, demo.plan_id).corrections}
    assert set(corrections) == {"alice", "carol"}  # bob's attempt was refused before it began
    assert corrections["alice"].status is CorrectionStatus.SUCCEEDED
    assert corrections["carol"].status is CorrectionStatus.RUNNING
