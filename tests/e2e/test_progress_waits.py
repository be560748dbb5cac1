"""`agents plan use` with a chat model in a terminal: while nothing is recorded — the model
thinking, a test command running — the last row says what the plan waits on and for how
long, and it is gone when the command ends.

The model (the OpenAI-compatible server of tests/support, through the real LangChain client
stack) holds its first answer until the terminal has shown the wait for it; the test command
is a real process that blocks on a named pipe until the terminal has shown the wait for it.
Were the row never drawn, the model would never answer and the command would never end.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_chat_model_cli import LAYOUT, Cli
from tests.e2e.test_chat_model_cli import docs as docs  # the fixture
from tests.support.openai_server import OpenAIServer, finish_phase, held, record_decision
from tests.support.openai_server import openai_server as openai_server  # the fixture
from tests.support.terminal import Terminal

pytest.importorskip("langchain_openai")

WAITING_FOR_MODEL = "⋯ waiting for openai:gpt-4o-mini · "
RUNNING_TESTS = "⋯ running local/run-tests · "
CLEAR_ROW = "\x1b[2K"


def _screen_rows(text: str) -> list[str]:
    """The rows a person sees once the output is drawn: a row redrawn in place (``\\r`` and
    erase-line) shows only what was written after its last erase."""
    return [row.rsplit(CLEAR_ROW, 1)[-1].rsplit("\r", 1)[-1] for row in text.split("\n")]


def test_the_terminal_says_what_the_plan_waits_on_and_clears_it(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    pipe = tmp_path / "tests-go-on"
    os.mkfifo(pipe)
    check = [sys.executable, "-c", f"open({str(pipe)!r}).read()"]  # blocks until written
    write_and_test = record_decision(
        key="write",
        decision_type="implementation_choice",
        question="What does the README say?",
        chosen_option="a one-line README, tested",
        parent_key="layout",
        depends_on=["layout"],
        confidence=0.7,
        tool_calls=[
            {
                "tool": "local/write-file",
                "arguments": {"resource": "local/docs", "path": "README.md", "content": "# r\n"},
            },
            {"tool": "local/run-tests", "arguments": {"resource": "local/docs", "argv": check}},
        ],
    )
    asked, answer = threading.Event(), threading.Event()
    openai_server.add(held(LAYOUT, asked, answer), finish_phase(), write_and_test, finish_phase())
    action = tmp_path / "readme.action.yaml"
    action.write_text(
        yaml.safe_dump(
            {
                "name": "local/readme",
                "prompt": "Write a README for the project",
                "resources": ["local/docs"],
                "tools": ["local/write-file", "local/run-tests"],
            }
        )
    )
    cli = Cli(sqlite_url, tmp_path, openai_server)
    command = [
        "--db", sqlite_url, "plan", "use", str(action), "--reasoner", "chat",
        "--model", "openai:gpt-4o-mini", "--automation-profile", "auto",
    ]  # fmt: skip
    terminal = Terminal(command, {**cli.env, "TERM": "xterm"}, columns=120)
    try:
        terminal.wait_for(WAITING_FOR_MODEL + "1 s")
        assert asked.is_set()  # the model has the question and has not answered
        answer.set()
        terminal.wait_for("#1 strategize strategy_choice: one README at the top", RUNNING_TESTS)
        with pipe.open("w") as go_on:  # the test command reads it and ends
            go_on.write("done\n")
    finally:
        answer.set()
    assert terminal.exit_code() == 0, terminal.text
    rows = _screen_rows(terminal.text)
    assert not [row for row in rows if "⋯" in row], terminal.text  # no wait left on screen
    assert "  #2 execute implementation_choice: a one-line README, tested" in rows
    assert "    ✓ local/run-tests: exit status 0" in rows
    assert openai_server.pending == 0
