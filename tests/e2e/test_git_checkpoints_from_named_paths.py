"""A plan on a git repository checkpoints each decision from the paths its file tools named,
without ``git status`` (issue 22), and a correction still rolls back exactly.

git's own trace (``GIT_TRACE2_EVENT``, which the sandbox passes through) counts the ``git
status`` runs of the whole plan: one when the sandbox is made (its baseline) and one when the
plan stops at its Apply gate (reconciliation seals the worktree, handing it out whole), none
for its three decisions. The oracle of "exactly" is a plan of the same action that chose the
other way from the start.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store

RES = "local/named"
LEAVE = "leave the code as it is"

Snapshot = dict[str, tuple[str, int, bytes]]


def call(tool: str, **arguments: str) -> dict[str, Any]:
    return {"tool": tool, "arguments": {"resource": RES, **arguments}}


def action(*, leave: bool = False) -> Action:
    return Action.model_validate(
        {
            "name": "local/named-paths",
            "prompt": "change the code",
            "resources": [RES],
            "decisions": [
                {
                    "key": "first",
                    "type": "implementation_choice",
                    "question": "Start with a file?",
                    "alternatives": [
                        {
                            "option": "a.txt",
                            "tool_calls": [call("local/write-file", path="a.txt", content="A\n")],
                        }
                    ],
                },
                {
                    "key": "change",
                    "type": "implementation_choice",
                    "question": "Change the code?",
                    "choose": LEAVE if leave else "change the code",
                    "alternatives": [
                        {
                            "option": "change the code",
                            "match": ["change"],
                            "tool_calls": [
                                call("local/edit-file", path="src/app.py", old="hi", new="hello"),
                                call("local/write-file", path="docs/new/notes.md", content="n\n"),
                                call("local/chmod", path="run.sh", mode="0700"),
                                call("local/delete-file", path="old.txt"),
                            ],
                        },
                        {"option": LEAVE, "match": ["leave", "unchanged"]},
                    ],
                },
                {
                    "key": "last",
                    "type": "implementation_choice",
                    "question": "End with a file?",
                    "alternatives": [
                        {
                            "option": "c.txt",
                            "tool_calls": [call("local/write-file", path="c.txt", content="C\n")],
                        }
                    ],
                },
            ],
        }
    )


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def options(tmp_path: Path, sqlite_store: Store, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    real = tmp_path / "real"
    (real / "src").mkdir(parents=True)
    (real / "src" / "app.py").write_text("print('hi')\n")
    (real / "run.sh").write_text("#!/bin/sh\n")
    (real / "run.sh").chmod(0o755)
    (real / "old.txt").write_text("old\n")
    git(real, "init", "-q", "-b", "main")
    git(real, "config", "user.email", "t@example.invalid")
    git(real, "config", "user.name", "Test")
    git(real, "add", "-A")
    git(real, "commit", "-q", "-m", "initial")
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=RES, kind="git", location=str(real), sandbox_strategy="git_worktree"
            )
        )
        uow.commit()
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def snapshot(store: Store, plan: Plan, options: RunOptions) -> Snapshot:
    assert options.sandbox_base is not None
    root = PlanSandboxes(store, plan.plan_id, options.sandbox_base).get(RES).workdir
    assert root is not None
    found: Snapshot = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".git":
            continue
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode):
            found[rel] = ("folder", stat.S_IMODE(st.st_mode), b"")
        else:
            found[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return found


def statuses(trace: Path) -> int:
    """How many ``git status`` ran, by git's own event trace."""
    if not trace.exists():
        return 0
    events = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    return sum(1 for e in events if e.get("event") == "cmd_name" and e.get("name") == "status")


def test_decisions_checkpoint_from_named_paths_and_a_revert_is_exact(
    tmp_path: Path, sqlite_store: Store, options: RunOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the oracle: a plan of the same action that left the code alone
    oracle = start_plan(sqlite_store, action(leave=True), profile_override="auto", options=options)
    assert oracle.state is PlanState.AWAITING_APPROVAL
    prior = snapshot(sqlite_store, oracle, options)
    # When a plan changes the code with the file tools, git's trace on
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    plan = start_plan(sqlite_store, action(), profile_override="auto", options=options)
    monkeypatch.delenv("GIT_TRACE2_EVENT")
    assert plan.state is PlanState.AWAITING_APPROVAL
    changed = snapshot(sqlite_store, plan, options)
    assert changed["src/app.py"][2] == b"print('hello')\n" and "old.txt" not in changed
    # Then its three decisions' checkpoints ran no git status: only the baseline and the seal
    assert statuses(trace) == 2
    # And a revert of the change, guided to leave the code alone, gives the oracle's sandbox
    with sqlite_store.unit_of_work() as uow:
        current = uow.decisions.for_plan(plan.plan_id, include_superseded=False)
        change = next(d.decision_id for d in current if d.step_key == "change")
    impact = preview(sqlite_store, change, CorrectionMode.REVERT, LEAVE)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status is CorrectionStatus.SUCCEEDED
    assert snapshot(sqlite_store, plan, options) == prior
    assert os.path.exists(tmp_path / "real" / "old.txt")  # the user's repository untouched
