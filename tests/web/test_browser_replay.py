"""A tab closed in the middle of its correction's replay, in a real Chromium: its app
process ends within the bounded stop (asked to quit, then its process group killed) even
though the replay is blocked in a tool's command — which is killed with it, though it runs
in a session of its own — and the correction is left as a crash
leaves it — still ``running``, reported by ``agents doctor``, marked failed by
``--repair``, after which the store is consistent and the plan resumes (docs/web.md,
"Keep a tab open while its replay runs")."""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.web.sessions import QUIT_TIMEOUT
from tests.web.browser import Terminal
from tests.web.conftest import TOKEN, Demo, Served, serve
from tests.web.flows import confirm_impact, give_guidance
from tests.web.gated import CHOSEN, Gate, agents, make_gated
from tests.web.serve_process import descendants

GUIDANCE = "work it once more"
# The stop asks the app to quit, waits QUIT_TIMEOUT, then kills its group: the slack is for
# the server to see the socket close and for a loaded machine. Without the kill the app
# would wait on the gate, which nobody opens, for ever.
ENDED_WITHIN = QUIT_TIMEOUT + 50.0


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Demo, Gate]]:
    yield from make_gated(str(tmp_path / "agents.db"), tmp_path, monkeypatch)


@pytest.fixture
def served_gated(gated: tuple[Demo, Gate]) -> Iterator[Served]:
    yield from serve(gated[0], env={"AGENTS_SERVE_TOKEN": TOKEN})


def wait_ended(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` (not our child) ends within ``timeout`` seconds."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(pidfd)


def test_closing_a_tab_mid_replay_ends_its_app_and_the_correction_can_be_repaired(
    gated: tuple[Demo, Gate], served_gated: Served, page: Page
) -> None:
    demo, gate = gated
    served = served_gated
    target, row = demo.decision(CHOSEN)
    warnings = len(preview(demo.store, target, CorrectionMode.REVERT, GUIDANCE).warnings)
    terminal = Terminal(page)
    terminal.open(served.login())
    terminal.wait_for("1 of 1 plans")
    terminal.press("Enter")
    terminal.wait_for("decisions", "· strategize · #0")  # the plan, its root's details
    terminal.press(*["ArrowDown"] * row)
    terminal.wait_for(f"decision {target}")
    terminal.press("c")  # revert, the default
    give_guidance(terminal, GUIDANCE)
    gate.close()
    with gate.watching() as reached:
        confirm_impact(terminal, warnings)
        app, command = reached.pids()  # the replay is in the step's command, and stays
    assert app in descendants(served.process.process.pid)

    page.close()
    assert wait_ended(app, ENDED_WITHIN), f"the closed tab's app {app} still runs"
    assert "did not quit" in served.process.stderr()  # it was busy: ended by the kill
    assert wait_ended(command, ENDED_WITHIN), "the step's command outlived its app"

    [correction] = show_plan(demo.store, demo.plan_id).corrections
    assert correction.status is CorrectionStatus.RUNNING  # as a crash leaves it
    found = agents(demo, "doctor")
    assert found.returncode == 1, found.stdout + found.stderr
    assert correction.correction_id in found.stdout
    repaired = agents(demo, "doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    [correction] = show_plan(demo.store, demo.plan_id).corrections
    assert correction.status is CorrectionStatus.FAILED
    clean = agents(demo, "doctor")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    gate.open()  # the step passes straight through again
    resumed = agents(demo, "plan", "resume", demo.plan_id)  # goes on with the replay
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    plan = show_plan(demo.store, demo.plan_id).summary.plan
    assert plan.state is PlanState.AWAITING_APPROVAL, resumed.stdout
    assert agents(demo, "doctor").returncode == 0
