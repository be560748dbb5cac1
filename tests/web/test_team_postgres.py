"""A team on PostgreSQL: alice and bob each in their own browser on one ``agents serve``.
Alice's correction shows up on bob's screen (the app polls the store), and while a
correction runs, bob's attempt at another is told the plan is busy. Then two ``agents
serve`` as on two machines — each its own home and sandbox folder, so no lock file is
shared, one database — both correct the same plan: the run lease's advisory lock on the
database lets one win and refuses the other cleanly."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.correct.execute import take_plan
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.web.credentials import add_user
from tests.web.browser import Terminal
from tests.web.conftest import TOKEN, Demo, Served, make_demo, serve
from tests.web.flows import choose_append, confirm_impact, give_guidance
from tests.web.gated import CHOSEN, Gate, agents, make_gated

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
        # the correction finishing: after an append the plan goes on to its new attempt's gates.)
        bob.wait_for("attempt 2")

        # someone else's correction takes the plan (it runs until the end of this test)
        target, _ = demo.decision(SPAWN)
        running = take_plan(
            demo.store, preview(demo.store, target, CorrectionMode.APPEND, "later"), "carol"
        )
        bob.wait_for("started (append) by carol")
        correct_spawn(bob, demo, "no docs at all")
        screen = bob.wait_for("Correction failed", "is busy")
        assert running.correction_id in screen

    corrections = {c.requested_by: c for c in show_plan(demo.store, demo.plan_id).corrections}
    assert set(corrections) == {"alice", "carol"}  # bob's attempt was refused before it began
    assert corrections["alice"].status is CorrectionStatus.SUCCEEDED
    assert corrections["carol"].status is CorrectionStatus.RUNNING


@pytest.fixture
def gated(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Demo, Gate]]:
    yield from make_gated(postgres_url, tmp_path, monkeypatch)


def start_revert(terminal: Terminal, served: Served, demo: Demo, guidance: str) -> None:
    """Log in, open the plan, revert the gated step with ``guidance``, confirm."""
    target, row = demo.decision(CHOSEN)
    warnings = len(preview(demo.store, target, CorrectionMode.REVERT, guidance).warnings)
    terminal.open(served.login())
    terminal.wait_for("1 of 1 plans")
    terminal.press("Enter")
    terminal.wait_for("decisions", "· strategize · #0")
    terminal.press(*["ArrowDown"] * row)
    terminal.wait_for(f"decision {target}")
    terminal.press("c")
    give_guidance(terminal, guidance)
    confirm_impact(terminal, warnings)


def test_two_servers_on_one_database_one_correction_wins(
    gated: tuple[Demo, Gate], new_page: Callable[[], Page]
) -> None:
    demo, gate = gated
    machines = {}
    with ExitStack() as stack:
        for name in ("here", "there"):  # "here" ran the plan: its sandboxes are here
            home = demo.workdir / f"{name}-home"
            home.mkdir()
            env = {"AGENTS_SERVE_TOKEN": TOKEN, "HOME": str(home)}
            if name == "there":
                env["AGENTS_SANDBOX_DIR"] = str(home / "sandboxes")
            machines[name] = stack.enter_context(contextmanager(serve)(demo, env=env))
        here, there = Terminal(new_page()), Terminal(new_page())

        gate.close()
        with gate.watching() as reached:
            start_revert(here, machines["here"], demo, "work it here")
            reached.pids()  # here's replay holds the plan, in the step's command
        start_revert(there, machines["there"], demo, "work it there")
        # refused by the lease's advisory lock (the lock files are on different machines),
        # before the correction began: one line, the plan's correction left to "here"
        there.wait_for("Correction failed", f"plan {demo.plan_id} is busy: an agents process")
        there.wait_for("using the same database")

        assert gate.release()
        here.wait_for("Correction succeeded")
        stderr = "".join(machines[name].process.stderr() for name in machines)
    assert "Traceback" not in stderr, stderr
    [correction] = show_plan(demo.store, demo.plan_id).corrections  # there's never began
    assert correction.status is CorrectionStatus.SUCCEEDED
    assert correction.guidance == "work it here"
    clean = agents(demo, "doctor")
    assert clean.returncode == 0, clean.stdout + clean.stderr
