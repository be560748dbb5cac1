"""Ctrl+C at the terminal while `agents plan use` runs a plan with a chat model.

The command runs in a pseudo-terminal of its own (its session's controlling terminal), and
the test types Ctrl+C into it, so the kernel sends SIGINT to the whole foreground process
group, as at a shell. The model (the OpenAI-compatible server of tests/support, through the
real LangChain client) is asked for the Execute decision and holds its answer until the
test has seen what the Ctrl+C did, so each Ctrl+C lands while the runner is mid-step.

One Ctrl+C pauses the plan after that step: the step's decision is recorded, nothing after
it is asked, the command exits 130 saying how to go on, and `agents plan run` finishes the
plan as an uninterrupted run would have. Two stop at once, as a crash would: the step is
not recorded, the plan is marked paused, and `plan run` makes the step again.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from cleveragents_tui.failpoints import ENV_VAR
from tests.e2e.test_chat_model_cli import ACTION, LAYOUT, WRITE, Cli
from tests.e2e.test_chat_model_cli import docs as docs  # the fixture
from tests.support.cli_output import heading_plan_id
from tests.support.openai_server import (
    OpenAIServer,
    finish_phase,
    held,
    record_decision,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture
from tests.support.terminal import WAIT_SECONDS, Terminal

pytest.importorskip("langchain_openai")

CTRL_C = b"\x03"


def _use(cli: Cli, tmp_path: Path, env: dict[str, str] | None = None) -> Terminal:
    action = tmp_path / "readme.action.yaml"
    action.write_text(yaml.safe_dump(ACTION))
    return Terminal(
        [
            "--db", cli.db_url, "plan", "use", str(action), "--reasoner", "chat",
            "--model", "openai:gpt-4o-mini", "--automation-profile", "auto",
        ],
        {**cli.env, "TERM": "dumb", **(env or {})},
    )  # fmt: skip


def _plan_id(text: str) -> str:
    marker = "agents plan run "
    return text[text.index(marker) + len(marker) :].split()[0]


def _finished_like_an_uninterrupted_run(cli: Cli, plan_id: str, docs: Path) -> None:
    ran = cli("plan", "run", plan_id)
    assert ran.returncode == 0, ran.stderr
    assert "execute · awaiting_approval" in ran.stdout
    tree = cli.tree(plan_id)
    assert {kind: d["chosen_option"] for kind, d in tree.items()} == {
        "prompt_definition": ACTION["prompt"],
        "strategy_choice": "one README at the top",
        "implementation_choice": "a one-line README",
    }
    assert cli("doctor").returncode == 0
    applied = cli("plan", "apply", plan_id)
    assert applied.returncode == 0, applied.stderr
    assert (docs / "README.md").read_text() == "# readme\n"


def test_one_ctrl_c_pauses_after_the_step_and_plan_run_goes_on(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    asked, pausing = threading.Event(), threading.Event()
    openai_server.add(LAYOUT, finish_phase(), held(WRITE, asked, pausing), finish_phase())
    cli = Cli(sqlite_url, tmp_path, openai_server)
    terminal = _use(cli, tmp_path)
    assert asked.wait(WAIT_SECONDS), terminal.text
    terminal.type(CTRL_C)
    terminal.wait_for("pauses after its current step (Ctrl+C again stops it at once)")
    pausing.set()
    assert terminal.exit_code() == 130, terminal.text
    said = terminal.text
    assert "#2 execute implementation_choice: a one-line README" in said  # the step finished
    assert "execute · paused" in said
    plan_id = _plan_id(said)
    assert f"paused after its current step: go on with agents plan run {plan_id}" in said
    assert openai_server.pending == 1  # Execute's end was not asked: the runner stopped
    _finished_like_an_uninterrupted_run(cli, plan_id, docs)


def test_a_second_ctrl_c_stops_at_once_and_the_step_is_made_again(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """The first Ctrl+C's pause fails (a failpoint), so only the second stops the run: the
    plan, left running mid-step, is marked paused by the command itself."""
    asked, ended = threading.Event(), threading.Event()
    openai_server.add(LAYOUT, finish_phase(), held(WRITE, asked, ended), WRITE, finish_phase())
    cli = Cli(sqlite_url, tmp_path, openai_server)
    terminal = _use(cli, tmp_path, {ENV_VAR: "plan.pause=raise"})
    assert asked.wait(WAIT_SECONDS), terminal.text
    terminal.type(CTRL_C)
    terminal.wait_for("could not be paused")
    terminal.type(CTRL_C)
    code = terminal.exit_code()
    ended.set()  # the held answer goes to a closed connection
    assert code == 130, terminal.text
    said = terminal.text
    assert "a one-line README" not in said  # stopped mid-step: nothing recorded for it
    assert "Traceback" not in said
    plan_id = _plan_id(said)
    assert f"stopped at its last recorded step: go on with agents plan run {plan_id}" in said
    shown = cli("plan", "show", plan_id)
    assert "execute · paused" in shown.stdout, shown.stdout
    _finished_like_an_uninterrupted_run(cli, plan_id, docs)


USAGE = record_decision(
    key="usage",
    decision_type="implementation_choice",
    question="What does the usage file say?",
    chosen_option="how to install",
    alternatives=["nothing yet"],
    confidence=0.9,
    tool_calls=[
        {
            "tool": "local/write-file",
            "arguments": {"resource": "local/docs", "path": "USAGE.md", "content": "usage\n"},
        }
    ],
)


def test_ctrl_c_during_an_append_to_an_applied_plan_pauses_the_appended_plan(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """The command follows the applied plan it corrects, which cannot be paused; the plan
    that runs is the appended one, and that is what Ctrl+C pauses. It used to say the
    applied plan cannot be paused and let the appended plan run on."""
    cli = Cli(sqlite_url, tmp_path, openai_server)
    openai_server.add(LAYOUT, finish_phase(), WRITE, finish_phase())
    started = cli.use_readme()
    plan_id = heading_plan_id(started.stdout)
    assert cli("plan", "apply", plan_id).returncode == 0
    write = cli.tree(plan_id)["implementation_choice"]["decision_id"]

    asked, pausing = threading.Event(), threading.Event()
    openai_server.add(finish_phase(), held(USAGE, asked, pausing), finish_phase())
    terminal = Terminal(
        [
            "--db", cli.db_url, "plan", "correct", write, "--mode=append",
            "--guidance", "add a usage file", "--yes",
        ],
        {**cli.env, "TERM": "dumb"},
    )  # fmt: skip
    try:
        assert asked.wait(WAIT_SECONDS), terminal.text
        terminal.type(CTRL_C)
        terminal.wait_for("pauses after its current step (Ctrl+C again stops it at once)")
    finally:
        pausing.set()
    assert terminal.exit_code() == 130, terminal.text
    said = terminal.text
    assert "cannot be paused" not in said
    appended = _plan_id(said)
    assert appended != plan_id
    assert f"paused after its current step: go on with agents plan run {appended}" in said
    assert openai_server.pending == 1  # the appended plan's Execute end was not asked

    refused = cli("plan", "run", plan_id)  # the applied plan: its appended plan goes on
    assert refused.returncode == 2
    assert f"its appended plan goes on: agents plan run {appended}" in refused.stderr
    ran = cli("plan", "run", appended)
    assert ran.returncode == 0, ran.stderr
    assert "execute · awaiting_approval" in ran.stdout
    assert cli("doctor").returncode == 0
    assert cli("plan", "apply", appended).returncode == 0
    assert (docs / "USAGE.md").read_text() == "usage\n"
