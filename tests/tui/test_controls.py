"""Visibility and control from the app: pause, resume, apply, cancelling a running replay,
and exporting the tree — each checked in the store (or on disk) afterwards."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.table import Table
from textual.widgets import DataTable, Static

from cleveragents_tui.actors.base import ActorState, Proposal
from cleveragents_tui.actors.reasoners.scripted import ScriptedReasoner
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, Phase, PlanState
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.read.browse import plan_tree, show_plan
from cleveragents_tui.engine.run.approvals import answer_approval, pending_approvals
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.export import ExportModal
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.modals.strategy import StrategyDialog
from cleveragents_tui.tui.screens.approvals import ApprovalsScreen
from cleveragents_tui.tui.screens.help import HelpScreen
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.tui.conftest import SIZE, DemoPlan, settle

pytestmark = pytest.mark.anyio


def _state(demo_plan: DemoPlan) -> PlanState:
    return show_plan(demo_plan.store, demo_plan.plan.plan_id).summary.plan.state


async def test_pause_then_resume_runs_the_plan_back_to_its_apply_gate(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("P")
        await pilot.pause()
        assert _state(demo_plan) is PlanState.PAUSED
        await pilot.press("R")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
    assert _state(demo_plan) is PlanState.AWAITING_APPROVAL


async def test_apply_asks_first_then_lands_the_plan(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("A")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("n")  # first: say no, nothing happens
        await pilot.pause()
        assert _state(demo_plan) is PlanState.AWAITING_APPROVAL
        await pilot.press("A")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    details = show_plan(demo_plan.store, demo_plan.plan.plan_id)
    assert details.summary.plan.state is PlanState.APPLIED
    with demo_plan.store.unit_of_work() as uow:
        approvals = uow.approvals.every(demo_plan.plan.plan_id)
    [gate] = [a for a in approvals if a.kind.value == "apply_gate"]
    assert gate.answered_by == "tester"
    branches = subprocess.run(
        ["git", "-C", str(demo_plan.env.repository), "branch", "--list", "cleveragents/apply/*"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert demo_plan.plan.plan_id in branches  # the sandbox landed on the real repository


async def test_cancel_or_apply_on_an_applied_plan_says_why_without_asking(
    demo_plan: DemoPlan,
) -> None:
    """An applied plan cannot be cancelled nor applied again: no confirmation (which read
    "Nothing is applied"), the reason at once."""
    apply_plan(demo_plan.store, demo_plan.plan.plan_id, "tester", demo_plan.options)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for key in ("X", "A"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, PlanScreen), key  # no confirmation dialog
        messages = [n.message for n in app._notifications]
    plan_id = demo_plan.plan.plan_id
    assert f"plan {plan_id} is applied: it cannot be cancelled" in messages
    assert f"plan {plan_id} is applied: there is nothing to apply" in messages
    assert _state(demo_plan) is PlanState.APPLIED


class _HeldReasoner:
    """The scripted reasoner, held before its first Execute proposal until released: the
    test can then act while the replay is certainly in the middle of its run."""

    def __init__(self, inner: ScriptedReasoner, entered: threading.Event, release: threading.Event):
        self._inner = inner
        self._entered = entered
        self._release = release

    def propose(self, state: ActorState, phase: Phase) -> Proposal | None:
        if phase is Phase.EXECUTE and not self._release.is_set():
            self._entered.set()
            assert self._release.wait(30), "the test never released the reasoner"
        return self._inner.propose(state, phase)


def held_app(demo_plan: DemoPlan) -> tuple[Any, threading.Event, threading.Event]:
    """The app on the demo plan, its runs' reasoner held before Execute (:class:`_HeldReasoner`);
    with the events it sets when reached and waits on to go on."""
    entered, release = threading.Event(), threading.Event()

    def factory(action: Action, current: Callable[[], dict[str, str]]) -> _HeldReasoner:
        return _HeldReasoner(ScriptedReasoner(action, current), entered, release)

    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    app.run_options = RunOptions(
        sandbox_base=demo_plan.options.sandbox_base, reasoner_factory=factory
    )
    return app, entered, release


async def start_held_replay(
    app: Any, pilot: Any, demo_plan: DemoPlan, entered: threading.Event
) -> ReplayModal:
    """Correct the release row's decision in the app, confirm every warning, and return the
    replay dialog once its replay is held in the middle of Execute."""
    await settle(app, pilot)
    app.screen.query_one(DecisionTree).reveal(demo_plan.decision("A row in the releases table"))
    await pilot.press("c", *"record rc1", "enter")
    await pilot.pause()
    # the impact preview: `record` has one alternative, which the guidance cannot select
    await pilot.press("1", "y")
    await pilot.pause()
    while isinstance(app.screen, ConfirmModal):  # each warning
        await pilot.press("y")
        await pilot.pause()
    replay = app.screen
    assert isinstance(replay, ReplayModal) and replay.worker is not None
    assert await asyncio.to_thread(entered.wait, 30), "the replay never reached Execute"
    return replay


async def test_cancelling_a_running_replay_pauses_the_plan_and_resume_finishes_it(
    demo_plan: DemoPlan,
) -> None:
    app, entered, release = held_app(demo_plan)
    async with app.run_test(size=SIZE) as pilot:
        replay = await start_held_replay(app, pilot, demo_plan, entered)
        await pilot.press("x")  # cancel while the replay is held mid-run
        await pilot.pause()
        assert replay.cancel_requested and replay.pausing is not None
        await replay.pausing.wait()  # the pause is written in a thread
        await pilot.pause()
        assert "cancel: plan paused" in "\n".join(replay.query_one("#replay-log").lines)  # type: ignore[attr-defined]
        assert _state(demo_plan) is PlanState.PAUSED
        release.set()
        assert replay.worker is not None
        await replay.worker.wait()
        await pilot.pause()
        assert replay.finished and replay.result is not None
        assert replay.result.correction.status is CorrectionStatus.SUCCEEDED
        assert replay.result.plan.state is PlanState.PAUSED  # stopped, not run to the gate
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("R")  # resume from the plan view
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    details = show_plan(demo_plan.store, demo_plan.plan.plan_id)
    assert details.summary.plan.state is PlanState.AWAITING_APPROVAL
    assert details.summary.plan.attempt == 2


@pytest.mark.parametrize("suffix", [".json", ".png"])
async def test_export_the_tree_from_the_app(
    demo_plan: DemoPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    monkeypatch.chdir(tmp_path)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ExportModal)
        field = app.screen.query_one("#export-path")
        field.value = f"tree{suffix}"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        # a second export to the same file asks before replacing it
        await pilot.press("x")
        await pilot.pause()
        app.screen.query_one("#export-path").value = f"tree{suffix}"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("n")
        await pilot.pause()
    written = tmp_path / f"tree{suffix}"
    if suffix == ".json":
        document = json.loads(written.read_text("utf-8"))
        assert document["plan"]["plan_id"] == demo_plan.plan.plan_id
        assert len(document["decisions"]) == 8
    else:
        assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_export_to_an_unknown_format_is_refused_with_a_message(
    demo_plan: DemoPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("x")
        await pilot.pause()
        app.screen.query_one("#export-path").value = "tree.svg"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PlanScreen)
        messages = [n.message for n in app._notifications]
        assert any("cannot tell the format of tree.svg" in m for m in messages)
    assert list(out.iterdir()) == []


@pytest.fixture
def supervised_plan(tmp_path: Path, sqlite_store: Store, options: RunOptions) -> DemoPlan:
    """The demo plan under `supervised`: it waits before Execute."""
    env = build_demo(sqlite_store, tmp_path / "demo")
    plan = start_plan(
        sqlite_store,
        load_action(str(env.action_file)),
        profile_override="supervised",
        options=options,
    )
    return DemoPlan(sqlite_store, env, plan, options)


async def test_edit_the_strategy_before_execute(supervised_plan: DemoPlan) -> None:
    plain = "A plain function registered in COMMANDS"
    greeter = "A greeter class with a configurable greeting"
    app = supervised_plan.app(plan_id=supervised_plan.plan.plan_id)
    target = supervised_plan.decision(plain)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.screen.query_one(DecisionTree).reveal(target)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, StrategyDialog)
        assert app.screen.alternatives == (greeter,)
        await pilot.click("#preview")  # take the alternative the actor considered
        await pilot.pause()
        assert isinstance(app.screen, ImpactModal)
        assert app.screen.impact.guidance == greeter
        assert app.screen.impact.rollbackable == ()  # nothing executed: nothing to roll back
        await pilot.press("y")
        await pilot.pause()
        replay = app.screen
        assert isinstance(replay, ReplayModal) and replay.worker is not None
        await replay.worker.wait()
        await pilot.pause()
        assert replay.result is not None
    plan = show_plan(supervised_plan.store, supervised_plan.plan.plan_id).summary.plan
    assert (plan.phase, plan.state, plan.attempt) == (
        Phase.STRATEGIZE,
        PlanState.AWAITING_APPROVAL,
        2,
    )
    current = {
        line.row.chosen_option for line in plan_tree(supervised_plan.store, plan.plan_id).lines
    }
    assert greeter in current and plain not in current


@pytest.mark.parametrize(("fixture", "listed"), [("supervised_plan", True), ("demo_plan", False)])
async def test_help_lists_edit_strategy_only_while_the_plan_strategizes(
    request: pytest.FixtureRequest, fixture: str, listed: bool
) -> None:
    """The help lists the keys that can act now, as the footer does (its check_action):
    `e` before Execute (supervised: waits there), not once the plan executes (auto)."""
    plan: DemoPlan = request.getfixturevalue(fixture)
    app = plan.app(plan_id=plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = "\n".join(
            str(cell)
            for table in app.screen.query(Static)
            if isinstance(table.content, Table)
            for column in table.content.columns
            for cell in column.cells
        )
        assert ("Edit strategy" in shown) is listed
        assert ("e" in screen.active_bindings) is listed  # the footer agrees
        assert "Correct" in shown and "Cancel plan" in shown


async def test_edit_strategy_is_not_offered_once_the_plan_executes(demo_plan: DemoPlan) -> None:
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        assert "e" not in screen.active_bindings  # not in the footer, nor in the palette
        screen.query_one(DecisionTree).reveal(demo_plan.decision("A row in the releases table"))
        await pilot.press("e")
        await pilot.pause()
        assert app.screen is screen  # no dialog
    assert show_plan(demo_plan.store, demo_plan.plan.plan_id).corrections == []


async def test_files_changed_outside_the_plan_are_warned_about_and_can_be_discarded(
    demo_plan: DemoPlan,
) -> None:
    sandboxes = PlanSandboxes(
        demo_plan.store, demo_plan.plan.plan_id, demo_plan.options.sandbox_base
    )
    workdir = sandboxes.get(f"{demo_plan.env.namespace}/hello-cli").workdir
    assert workdir is not None
    (workdir / "SCRATCH.md").write_text("someone else's note\n", "utf-8")
    app = demo_plan.app(plan_id=demo_plan.plan.plan_id)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("A", "y")  # apply: it stops and asks instead of landing the file
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        status = screen.query_one(PlanStatus).plain_text
        assert "⚠ Files changed in the sandbox outside the plan" in status
        assert "SCRATCH.md (added)" in status
        assert any("SCRATCH.md" in n.message for n in app._notifications)
        await pilot.press("a")  # the approvals queue: deny discards the outside change
        await settle(app, pilot)
        assert isinstance(app.screen, ApprovalsScreen)
        [asked] = app.screen.approvals
        assert asked.kind is ApprovalKind.RECONCILE
        await pilot.press("n")
        await pilot.pause()
        await pilot.press(*"not ours", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("R")  # resume: the apply approved earlier goes through
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
    assert _state(demo_plan) is PlanState.APPLIED
    assert not (workdir / "SCRATCH.md").exists()
    files = subprocess.run(
        [
            "git",
            "-C",
            str(demo_plan.env.repository),
            "ls-tree",
            "-r",
            "--name-only",
            f"cleveragents/apply/{demo_plan.plan.plan_id}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "SCRATCH.md" not in files and "hello_cli/greet.py" in files


async def test_running_a_child_on_its_own_names_the_parent_that_lands_it(
    supervised_plan: DemoPlan,
) -> None:
    """`R` on a child plan whose question was answered runs it to the end of its run; its
    parent still waits. The note used to end at "plan execute · completed", and nothing in
    the app said that the parent's run goes on and lands it."""
    store, parent = supervised_plan.store, supervised_plan.plan.plan_id
    for _ in range(30):  # a bound: the demo asks about a dozen questions
        [asked] = pending_approvals(store, parent, family=True)
        assert asked.kind is not ApprovalKind.APPLY_GATE, "the child never ran on its own"
        answer_approval(store, asked.approval_id, approve=True, by="tester")
        if asked.plan_id == parent:
            resume_plan(store, parent, supervised_plan.options)
            continue
        app = supervised_plan.app(plan_id=asked.plan_id)
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("R")
            await settle(app, pilot)
            said = [n.message for n in app._notifications][-1]
            await pilot.press("a")  # nothing to answer, but the parent is not done
            await settle(app, pilot)
            caption = str(app.screen.query_one("#approvals-caption", Static).render())
        if show_plan(store, asked.plan_id).summary.plan.state is PlanState.COMPLETED:
            assert said.endswith(f"lands with its parent plan: run plan {parent}"), said
            assert "press R to go on" in caption and f"\n  {parent[:10]}  " in caption, caption
            await _goes_on_with_r(supervised_plan)
            return
        assert "lands with" not in said  # at its next question


async def test_pausing_an_applied_plan_pauses_its_appended_plan_that_runs(
    demo_plan: DemoPlan,
) -> None:
    """`P` on an applied plan while a correction's appended plan runs (here from another
    session) pauses that plan, as the app's quit and the replay's cancel do, and says which.
    It said only that an applied plan cannot be paused, and the appended plan ran on."""
    store, plan_id = demo_plan.store, demo_plan.plan.plan_id
    apply_plan(store, plan_id, "tester", demo_plan.options)
    app, entered, release = held_app(demo_plan)
    impact = preview(
        store,
        demo_plan.decision("A plain function registered in COMMANDS"),
        CorrectionMode.APPEND,
        "a class",
    )
    appending = threading.Thread(
        target=execute,
        args=(store, impact),
        kwargs={"acknowledged": True, "requested_by": "bob", "options": app.run_options},
    )
    appending.start()
    try:
        assert await asyncio.to_thread(entered.wait, 30), "the append never reached Execute"
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("P")
            await settle(app, pilot)
            said = [n.message for n in app._notifications]
    finally:
        release.set()
        await asyncio.to_thread(appending.join, 60)
    [correction] = show_plan(store, plan_id).corrections
    appended = correction.appended_plan_id
    assert f"its appended plan {appended} paused: paused" in said, said
    assert appended is not None
    assert show_plan(store, appended).summary.plan.state is PlanState.PAUSED  # after its step


async def _goes_on_with_r(demo_plan: DemoPlan) -> None:
    """The parent, waiting with nothing left to answer, says so in its heading; `R` runs it
    on to its next question."""
    parent = demo_plan.plan.plan_id
    listed = demo_plan.app()  # the plan list marks it too: `0 R`, and says so above
    async with listed.run_test(size=SIZE) as pilot:
        await settle(listed, pilot)
        table = listed.screen.query_one(DataTable)
        row = table.get_row(parent)
        assert str(row[[key.value for key in table.columns].index("appr")]) == "0 R", row
        caption = str(listed.screen.query_one("#plans-caption", Static).render())
        assert "1 with nothing left to answer: open, press R" in caption, caption
    app = demo_plan.app(plan_id=parent)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        heading = app.screen.query_one(PlanStatus).plain_text
        assert "nothing left to answer: R goes on" in heading, heading
        await pilot.press("R")
        await settle(app, pilot)
    assert pending_approvals(demo_plan.store, parent, family=True)  # it went on, and asks
