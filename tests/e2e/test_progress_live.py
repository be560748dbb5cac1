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

import pytest
import yaml

from tests.e2e.test_chat_model_cli import ACTION, LAYOUT, WRITE, Cli
from tests.e2e.test_chat_model_cli import docs as docs  # the fixture
from tests.support.openai_server import OpenAIServer, Reply, Request, finish_phase, http_error
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
