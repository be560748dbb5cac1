"""`agents --progress plan use` with a chat model, in its own process: each decision's line
reaches the terminal while the model is still deciding the next one, not when the run ends.

The model (the OpenAI-compatible server of tests/support, reached through the real LangChain
client stack) holds back its third answer until the test has read the first decision's line
from the process's stderr; were the lines printed only at the end, that answer would wait
for nothing and the model would refuse it, so the run would fail.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_chat_model_cli import ACTION, LAYOUT, WRITE, Cli
from tests.e2e.test_chat_model_cli import docs as docs  # the fixture
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    Request,
    finish_phase,
    http_error,
    record_decision,
    tool_call,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

pytest.importorskip("langchain_openai")

STRATEGY_LINE = "  #1 strategize strategy_choice: one README at the top\n"
WAIT_SECONDS = 120  # a bound on a failure, never waited in a passing run


def test_progress_lines_arrive_while_the_model_is_still_deciding(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    shown = threading.Event()

    def write_once_the_strategy_is_shown(request: Request) -> Reply:
        if not shown.wait(WAIT_SECONDS):
            return http_error(400, "the strategy's progress line was not shown during the run")
        return WRITE

    openai_server.add(LAYOUT, finish_phase(), write_once_the_strategy_is_shown, finish_phase())
    action = tmp_path / "readme.action.yaml"
    action.write_text(yaml.safe_dump(ACTION))
    cli = Cli(sqlite_url, tmp_path, openai_server)
    command = [
        sys.executable, "-m", "cleveragents_tui", "--db", sqlite_url, "--progress",
        "plan", "use", str(action), "--reasoner", "chat", "--model", "openai:gpt-4o-mini",
        "--automation-profile", "auto",
    ]  # fmt: skip
    with subprocess.Popen(
        command, env=cli.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as running:
        assert running.stderr is not None and running.stdout is not None
        lines = []
        for line in running.stderr:
            lines.append(line)
            if line == STRATEGY_LINE:
                shown.set()
        out = running.stdout.read()
    assert running.returncode == 0, "".join(lines) + out
    assert shown.is_set()
    said = "".join(lines)
    assert "  · model openai:gpt-4o-mini: 876 tokens\n" in said  # LAYOUT's usage, 812 + 64
    assert "  #2 execute implementation_choice: a one-line README\n" in said
    assert lines[-1] == "  · now execute · awaiting_approval\n"
    assert openai_server.pending == 0


def _edit(old: str, new: str) -> dict[str, Any]:
    arguments = {"resource": "local/docs", "path": "README.md", "old": old, "new": new}
    return {"tool": "local/edit-file", "arguments": arguments}


def test_a_failed_call_and_the_calls_made_in_its_place_are_shown_as_they_end(
    openai_server: OpenAIServer, docs: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """The model's edit misses (README.md says "old", not "older"): its ✗ line with the
    tool's reason, the recovery decision, then the replacement's ✓ line — what the model
    did, while it did it, not only in `plan explain` afterwards."""
    missed = record_decision(
        key="write",
        decision_type="implementation_choice",
        question="What does the README say?",
        chosen_option="the README says new",
        parent_key="layout",
        depends_on=["layout"],
        confidence=0.7,
        tool_calls=[_edit("older", "new")],
    )
    instead = tool_call(
        "fix_failure", {"rationale": "it says old", "tool_calls": [_edit("old", "new")]}
    )
    openai_server.add(LAYOUT, finish_phase(), missed, instead, finish_phase())
    action = tmp_path / "readme.action.yaml"
    action.write_text(yaml.safe_dump({**ACTION, "tools": ["local/write-file", "local/edit-file"]}))
    cli = Cli(sqlite_url, tmp_path, openai_server)
    ran = cli(
        "--progress", "plan", "use", str(action), "--reasoner", "chat", "--model",
        "openai:gpt-4o-mini", "--automation-profile", "auto",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr + ran.stdout
    lines = ran.stderr.splitlines()
    decision = lines.index("  #2 execute implementation_choice: the README says new")
    failed = next(i for i, line in enumerate(lines) if line.startswith("    ✗ local/edit-file: "))
    assert "old text" in lines[failed] and "not found" in lines[failed]
    assert lines[failed].count("local/edit-file") == 1, lines[failed]  # not "tool: tool: …"
    recovery = next(i for i, line in enumerate(lines) if " error_recovery: " in line)
    assert lines[recovery].startswith("  #3 execute error_recovery: Replace the failed ")
    replaced = "    ✓ local/edit-file: edited README.md: replaced 1 occurrence at line 1"
    assert decision < failed < recovery < lines.index(replaced)
    assert len([line for line in lines if line.startswith("    ")]) == 2, lines
    assert not any("failed in step" in line for line in lines)  # said once, by the ✗ line
    assert (docs / "README.md").read_text() == "old\n"  # the sandbox's, until Apply
    assert openai_server.pending == 0
