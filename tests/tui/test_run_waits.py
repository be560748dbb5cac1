"""A plan run from the app (`R`), and a correction's replay, on a chat model: while the model
thinks, nothing is recorded, and the status bar (the replay dialog's status) says what the
run waits on and for how long; the row goes once the model has answered. The model is the
OpenAI-compatible server of tests/support, through the real LangChain client, holding its
answer until the test has seen the row."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from textual.pilot import Pilot
from textual.widgets import Static

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.engine.run.approvals import answer_approval, pending_approvals
from cleveragents_tui.engine.run.plans import change_profile
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.modals.correction import CorrectionDialog
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.replay import ReplayModal
from cleveragents_tui.tui.screens.plan_view import PlanScreen
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.tui.widgets.status_bar import PlanStatus
from tests.cli.test_chat_model_choice import MODEL, STRATEGY  # the model and its first reply
from tests.e2e.test_chat_model_cli import GUIDANCE, LAYOUT, WRITE, Cli, _rewrite
from tests.e2e.test_chat_model_cli import docs as docs  # the fixture
from tests.support.cli_output import heading_plan_id
from tests.support.folders import add_folder
from tests.support.openai_server import (
    HELD_SECONDS,
    OpenAIServer,
    Reply,
    Request,
    finish_phase,
    held,
    http_error,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture
from tests.tui.conftest import SIZE, settle, until_screen

pytestmark = pytest.mark.anyio

WAITING = f"now: ⋯ waiting for {MODEL} · "
TRIES = 2000  # pauses of 0.01 s: a bound on a failure, never reached in a passing run


async def _until(app: AgentsApp, pilot: Pilot[None], shown: bool) -> str:
    """The status bar's text once the wait row is ``shown`` (or gone)."""
    for _ in range(TRIES):
        text = app.screen.query_one(PlanStatus).plain_text
        if (WAITING in text) is shown:
            return text
        await pilot.pause(0.01)
    raise AssertionError(f"the wait row never {'came' if shown else 'went'}: {text}")


async def test_the_status_bar_says_what_a_run_waits_on_while_the_model_thinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    monkeypatch.setenv("OPENAI_API_KEY", "local")
    db = str(tmp_path / "agents.db")
    action = tmp_path / "think.yaml"
    action.write_text(yaml.safe_dump({"name": "local/think", "prompt": "Think it through"}))
    asked, answer = threading.Event(), threading.Event()
    with OpenAIServer([held(STRATEGY, asked, answer)]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)

        def run(*args: str) -> str:
            result = CliRunner().invoke(cli, ["--db", db, *args])
            assert result.exit_code == 0, result.output
            return result.output

        run("plan", "use", str(action), "--model", MODEL, "--automation-profile", "manual")
        [gate] = json.loads(run("approval", "list", "--format=json"))["approvals"]
        run("approval", "approve", gate["approval_id"])
        store = Store.open(db)
        try:
            app = AgentsApp(
                store,
                user="tester",
                plan_id=gate["plan_id"],
                run_options=RunOptions(sandbox_base=tmp_path / "sandboxes"),
                poll_seconds=None,
            )
            async with app.run_test(size=SIZE) as pilot:
                await settle(app, pilot)
                assert WAITING not in app.screen.query_one(PlanStatus).plain_text
                await pilot.press("R")
                text = await _until(app, pilot, shown=True)
                assert asked.is_set() and not answer.is_set(), text
                answer.set()
                await _until(app, pilot, shown=False)
                await settle(app, pilot)
            assert server.pending == 0  # the model made the decision the run waited for
        finally:
            answer.set()
            store.close()


async def test_the_replay_dialog_says_what_the_replay_waits_on(
    openai_server: OpenAIServer,
    docs: Path,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli = Cli(sqlite_url, tmp_path, openai_server)
    openai_server.add(LAYOUT, finish_phase(), WRITE, finish_phase())
    started = cli.use_readme()
    assert started.returncode == 0, started.stderr
    plan_id = heading_plan_id(started.stdout)
    write = cli.tree(plan_id)["implementation_choice"]["decision_id"]
    asked, answer = threading.Event(), threading.Event()

    def rewrite_when_let(request: Request) -> Reply:
        asked.set()
        if not answer.wait(HELD_SECONDS):
            return http_error(400, "the test never released the answer")
        return _rewrite(request)

    openai_server.add(rewrite_when_let, finish_phase())
    monkeypatch.setenv("OPENAI_API_KEY", "local")  # the app's process runs the replay
    store = Store.open(sqlite_url)
    try:
        options = RunOptions(sandbox_base=tmp_path / "sandboxes")
        app = AgentsApp(
            store, user="tester", plan_id=plan_id, run_options=options, poll_seconds=None
        )
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert isinstance(app.screen, PlanScreen)
            assert app.screen.query_one(DecisionTree).reveal(write)
            await settle(app, pilot)
            await pilot.press("c")
            await until_screen(app, pilot, CorrectionDialog)
            await pilot.press(*GUIDANCE, "enter")
            await until_screen(app, pilot, ImpactModal)
            await pilot.press("y")
            while not isinstance(app.screen, ReplayModal):  # each warning of the correction
                await until_screen(app, pilot, ConfirmModal | ReplayModal)
                if isinstance(app.screen, ConfirmModal):
                    await pilot.press("y")
                    await pilot.pause()
            replay = app.screen
            status = replay.query_one("#replay-status", Static)
            waiting = f"⋯ waiting for {MODEL} · "
            for _ in range(TRIES):
                if waiting in str(status.render()):
                    break
                await pilot.pause(0.01)
            assert waiting in str(status.render()), str(status.render())
            assert asked.is_set() and not answer.is_set()
            answer.set()
            assert replay.worker is not None
            await replay.worker.wait()
            await pilot.pause()
            assert replay.result is not None
            assert replay.result.correction.status.value == "succeeded"
            assert waiting not in str(status.render())
        assert openai_server.pending == 0
    finally:
        answer.set()
        store.close()


async def test_the_status_bar_says_what_a_child_plan_waits_on(tmp_path: Path) -> None:
    """`R` runs a plan that runs a child plan, whose test command blocks on a named pipe:
    the parent itself waits on nothing but its child, and the bar says what the child waits
    on, named by its action (before, the bar stayed empty while the child ran)."""
    pipe = tmp_path / "tests-go-on"
    os.mkfifo(pipe)
    check = [sys.executable, "-c", f"open({str(pipe)!r}).read()"]  # blocks until written
    test_run = {"tool": "local/run-tests", "arguments": {"resource": "local/files", "argv": check}}
    strategy = {
        "key": "layout",
        "type": "strategy_choice",
        "question": "Which layout?",
        "alternatives": [{"option": "as it is"}],
    }
    split = {
        "key": "split",
        "type": "subplan_spawn",
        "parent": "layout",
        "question": "Split the work?",
        "alternatives": [{"option": "one child plan", "spawn": ["local/checks"]}],
    }
    child = {
        "name": "local/checks",
        "prompt": "check the files",
        "resources": ["local/files"],
        "decisions": [
            strategy,
            {
                "key": "check",
                "type": "implementation_choice",
                "parent": "layout",
                "question": "Check?",
                "alternatives": [{"option": "run them", "tool_calls": [test_run]}],
            },
        ],
    }
    action = Action.model_validate(
        {
            "name": "local/parent",
            "prompt": "check the files in a child plan",
            "resources": ["local/files"],
            "decisions": [strategy, split],
            "subactions": [child],
        }
    )
    store = Store.open(str(tmp_path / "agents.db"))
    try:
        add_folder(store, "local/files", tmp_path / "files")
        options = RunOptions(sandbox_base=tmp_path / "sandboxes")
        plan = start_plan(store, action, profile_override="manual", options=options)
        change_profile(store, plan.plan_id, "auto")  # runs on by itself once `R` is pressed
        [gate] = pending_approvals(store, plan.plan_id)
        answer_approval(store, gate.approval_id, approve=True, by="tester")
        app = AgentsApp(
            store, user="tester", plan_id=plan.plan_id, run_options=options, poll_seconds=None
        )
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("R")
            waiting = "now: ⋯ [checks] running local/run-tests · "
            for _ in range(TRIES):
                text = app.screen.query_one(PlanStatus).plain_text
                if waiting in text:
                    break
                await pilot.pause(0.01)
            try:
                assert waiting in text, text
            finally:
                _let_go(pipe)  # the test command reads it and ends
            for _ in range(TRIES):
                text = app.screen.query_one(PlanStatus).plain_text
                if "now:" not in text:
                    break
                await pilot.pause(0.01)
            assert "now:" not in text, text
            await settle(app, pilot)
        with store.unit_of_work() as uow:
            [ran] = [c for c in uow.plans.children(plan.plan_id)]
        assert ran.state.value == "completed", ran
    finally:
        store.close()


def _let_go(pipe: Path) -> None:
    """Write to ``pipe`` if a command reads it (else it never started: nothing to end)."""
    try:
        end = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no reader
        return
    with os.fdopen(end, "w") as go_on:
        go_on.write("done\n")
