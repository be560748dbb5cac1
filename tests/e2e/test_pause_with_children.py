"""Pausing or cancelling a plan while the child plan its run started is mid-step.

A parent's run runs its child plans before its own Execute. The child here is decided by a
chat model (the OpenAI-compatible server of tests/support, through the real LangChain
client) that holds its Execute answer until the test has paused or cancelled the parent
from another process, as a person at a second terminal would.

Pausing the parent used to leave the child running on to its gate — every model and tool
call the person asked to stop — and the parent only stopped after it. Now the child stops
after its current step too; `agents plan run` of the parent resumes both, and the plan
ends as an uninterrupted run does. Cancelling the parent cancels the child, which only the
parent's Apply could have landed.
"""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import text

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.failpoints import ENV_VAR
from cleveragents_tui.store.store import Store
from tests.e2e.test_chat_model_cli import Cli
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

GUIDE = {
    "name": "local/guide",
    "prompt": "Write the user guide",
    "resources": ["local/guide"],
    "tools": ["local/write-file"],
}
ACTION = {
    "name": "local/handbook",
    "prompt": "Write a README and, in a child plan, a user guide",
    "resources": ["local/docs"],
    "tools": ["local/write-file"],
    "subactions": [GUIDE],
}


def _write(resource: str, path: str, content: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": resource, "path": path, "content": content},
    }


SPAWN = record_decision(
    key="guide",
    decision_type="subplan_spawn",
    question="Who writes the user guide?",
    chosen_option="a child plan",
    alternatives=["this plan"],
    spawn=["local/guide"],
    confidence=0.8,
)
GUIDE_LAYOUT = record_decision(
    key="layout",
    decision_type="strategy_choice",
    question="How is the guide laid out?",
    chosen_option="one page",
    alternatives=["a page per command"],
    confidence=0.8,
)
WRITE_GUIDE = record_decision(
    key="write",
    decision_type="implementation_choice",
    question="What does the guide say?",
    chosen_option="how to install",
    alternatives=["nothing yet"],
    parent_key="layout",
    tool_calls=[_write("local/guide", "GUIDE.md", "# install\n")],
    confidence=0.8,
)
WRITE_README = record_decision(
    key="readme",
    decision_type="implementation_choice",
    question="What does the README say?",
    chosen_option="a one-line README",
    alternatives=["a long README"],
    tool_calls=[_write("local/docs", "README.md", "# handbook\n")],
    confidence=0.8,
)


@pytest.fixture
def folders(sqlite_store: Store, tmp_path: Path) -> tuple[Path, Path]:
    made = []
    with sqlite_store.unit_of_work(write=True) as uow:
        for name in ("docs", "guide"):
            folder = tmp_path / name
            folder.mkdir()
            uow.resources.add(
                Resource(
                    resource_id=f"local/{name}",
                    kind="filesystem",
                    location=str(folder),
                    sandbox_strategy="filesystem_copy",
                )
            )
            made.append(folder)
        uow.commit()
    return made[0], made[1]


def _start(cli: Cli, tmp_path: Path) -> subprocess.Popen[str]:
    action = tmp_path / "handbook.action.yaml"
    action.write_text(yaml.safe_dump(ACTION))
    return subprocess.Popen(
        [
            sys.executable, "-m", "cleveragents_tui", "--db", cli.db_url, "plan", "use",
            str(action), "--reasoner", "chat", "--model", "openai:gpt-4o-mini",
            "--automation-profile", "auto",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.env,
    )  # fmt: skip


def _ended(run: subprocess.Popen[str]) -> str:
    """What a run that did not get as far as it should said (stopped if it still runs)."""
    run.kill()
    out, err = run.communicate()
    return out + err


def _plans(cli: Cli) -> dict[str, dict[str, Any]]:
    """Every plan by its action's name."""
    listed = cli("--format=json", "plan", "list")
    assert listed.returncode == 0, listed.stderr
    return {p["action"]: p for p in json.loads(listed.stdout)["plans"]}


def _chosen(cli: Cli, plan_id: str) -> dict[str, str]:
    shown = cli("plan", "tree", plan_id, "--format=json")
    assert shown.returncode == 0, shown.stderr
    return {d["decision_type"]: d["chosen_option"] for d in json.loads(shown.stdout)["decisions"]}


def _stopped_mid_child(
    openai_server: OpenAIServer, cli: Cli, tmp_path: Path, command: str
) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """Start the plan, `agents plan COMMAND` its parent while the child's Execute decision
    is under way, then let the model answer. Returns the run, the parent and the child."""
    asked, release = threading.Event(), threading.Event()
    openai_server.add(
        SPAWN, finish_phase(),  # the parent's Strategize
        GUIDE_LAYOUT, finish_phase(), held(WRITE_GUIDE, asked, release), finish_phase(),  # the child
        WRITE_README, finish_phase(),  # the parent's Execute
    )  # fmt: skip
    run = _start(cli, tmp_path)
    try:
        assert asked.wait(WAIT_SECONDS), _ended(run)
        plans = _plans(cli)
        parent, child = plans["local/handbook"]["plan_id"], plans["local/guide"]["plan_id"]
        done = cli("plan", command, parent)
        assert done.returncode == 0, done.stderr
        assert f"child plan {child} (local/guide)" in done.stdout, done.stdout
    finally:
        release.set()
    out, err = run.communicate(timeout=WAIT_SECONDS)
    return subprocess.CompletedProcess(run.args, run.returncode, out, err), parent, child


def _changed_by(store: Store, plan_id: str, kind: str) -> list[tuple[str | None, object]]:
    """Who made each ``kind`` event of the plan, and the plan it came with."""
    with store.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT actor, payload FROM events WHERE plan_id = :p AND kind = :k"),
            {"p": plan_id, "k": kind},
        )
        return [(actor, json.loads(payload).get("with")) for actor, payload in rows]


def test_pausing_the_parent_pauses_its_running_child_and_plan_run_goes_on(
    openai_server: OpenAIServer,
    folders: tuple[Path, Path],
    sqlite_store: Store,
    sqlite_url: str,
    tmp_path: Path,
) -> None:
    docs, guide = folders
    cli = Cli(sqlite_url, tmp_path, openai_server)
    run, parent, child = _stopped_mid_child(openai_server, cli, tmp_path, "pause")
    assert run.returncode == 0, run.stderr
    plans = _plans(cli)
    assert plans["local/guide"]["state"] == "paused"
    assert plans["local/handbook"]["state"] == "paused"
    me = getpass.getuser()  # who paused both, in the log the app's status line reads
    assert _changed_by(sqlite_store, parent, "plan_paused") == [(me, None)]
    assert _changed_by(sqlite_store, child, "plan_paused") == [(me, parent)]
    # the child's step was made, and nothing after it was asked: neither the child's end
    # of Execute nor anything of the parent's Execute
    assert _chosen(cli, child)["implementation_choice"] == "how to install"
    assert openai_server.pending == 3

    went_on = cli("plan", "run", parent)
    assert went_on.returncode == 0, went_on.stderr
    assert "execute · awaiting_approval" in went_on.stdout, went_on.stdout
    assert openai_server.pending == 0
    assert _changed_by(sqlite_store, child, "plan_resumed") == [(me, parent)]
    # as an uninterrupted run: both trees whole, nothing asked twice
    assert _chosen(cli, parent) == {
        "prompt_definition": ACTION["prompt"],
        "subplan_spawn": "a child plan",
        "implementation_choice": "a one-line README",
    }
    assert _chosen(cli, child) == {
        "prompt_definition": GUIDE["prompt"],
        "strategy_choice": "one page",
        "implementation_choice": "how to install",
    }
    assert cli("doctor").returncode == 0
    applied = cli("plan", "apply", parent)
    assert applied.returncode == 0, applied.stderr
    assert (docs / "README.md").read_text() == "# handbook\n"
    assert (guide / "GUIDE.md").read_text() == "# install\n"


def test_cancelling_the_parent_cancels_its_running_child(
    openai_server: OpenAIServer, folders: tuple[Path, Path], sqlite_url: str, tmp_path: Path
) -> None:
    docs, guide = folders
    cli = Cli(sqlite_url, tmp_path, openai_server)
    run, parent, _ = _stopped_mid_child(openai_server, cli, tmp_path, "cancel")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    plans = _plans(cli)
    assert plans["local/guide"]["state"] == "cancelled"
    assert plans["local/handbook"]["state"] == "cancelled"
    assert openai_server.pending == 3  # the child stopped after its step
    assert plans["local/guide"]["pending_approvals"] == 0
    assert cli("plan", "run", parent).returncode == 2  # a cancelled plan goes no further
    assert cli("doctor").returncode == 0
    assert not (docs / "README.md").exists() and not (guide / "GUIDE.md").exists()


def test_a_second_ctrl_c_stops_at_once_while_a_child_plan_is_mid_step(
    openai_server: OpenAIServer, folders: tuple[Path, Path], sqlite_url: str, tmp_path: Path
) -> None:
    """The first Ctrl+C's pause fails (a failpoint), so only the second stops the run,
    while the child's model call is still unanswered: the command does not wait for it.
    Both plans are marked paused, and `agents plan run` makes the child's step again."""
    docs, guide = folders
    cli = Cli(sqlite_url, tmp_path, openai_server)
    asked, release = threading.Event(), threading.Event()
    openai_server.add(
        SPAWN, finish_phase(), GUIDE_LAYOUT, finish_phase(), held(WRITE_GUIDE, asked, release)
    )
    action = tmp_path / "handbook.action.yaml"
    action.write_text(yaml.safe_dump(ACTION))
    terminal = Terminal(
        [
            "--db", cli.db_url, "plan", "use", str(action), "--reasoner", "chat",
            "--model", "openai:gpt-4o-mini", "--automation-profile", "auto",
        ],
        {**cli.env, "TERM": "dumb", ENV_VAR: "plan.pause=raise"},
    )  # fmt: skip
    try:
        assert asked.wait(WAIT_SECONDS), terminal.text
        terminal.type(CTRL_C)
        terminal.wait_for("could not be paused")
        terminal.type(CTRL_C)
        code = terminal.ended()
    finally:
        release.set()  # the held answer goes to a closed connection
        terminal.close()
    assert code == 130, terminal.text  # ended while the child's answer was still held
    assert "stopped at its last recorded step: go on with agents plan run" in terminal.text
    assert "Traceback" not in terminal.text
    plans = _plans(cli)
    assert plans["local/handbook"]["state"] == "paused"
    assert plans["local/guide"]["state"] == "paused"
    assert "implementation_choice" not in _chosen(cli, plans["local/guide"]["plan_id"])

    openai_server.add(WRITE_GUIDE, finish_phase(), WRITE_README, finish_phase())
    went_on = cli("plan", "run", plans["local/handbook"]["plan_id"])
    assert went_on.returncode == 0, went_on.stderr
    assert openai_server.pending == 0
    assert _chosen(cli, plans["local/guide"]["plan_id"])["implementation_choice"] == (
        "how to install"
    )
    assert cli("doctor").returncode == 0
    applied = cli("plan", "apply", plans["local/handbook"]["plan_id"])
    assert applied.returncode == 0, applied.stderr
    assert (docs / "README.md").read_text() == "# handbook\n"
    assert (guide / "GUIDE.md").read_text() == "# install\n"
