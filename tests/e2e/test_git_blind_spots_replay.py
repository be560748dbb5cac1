"""A correction's replay in a git repository sees exactly what the decision first saw.

The plan's second step runs a shell command that needs an empty folder the first step made,
no log file (ignored by ``.gitignore``) of its own yet, and the ``chmod 600`` the first step
gave a file. Reverting that step rolls the repository back and runs it again: before git's
blind spots were recorded beside each checkpoint, the folder was gone, the log and the
``chmod 644`` were still there, and the replayed command failed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, Phase, PlanState
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store

REPO = "local/repo"
PREPARE = "mkdir empty && echo kept > kept.log && echo s > secret.txt && chmod 600 secret.txt"
WORK = (
    "test ! -e later.log && test -d empty && test $(stat -c %a secret.txt) = 600 "
    "&& rm -r empty && echo later > later.log && chmod 644 secret.txt"
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def command(script: str) -> dict[str, Any]:
    return {
        "tool": "local/run-command",
        "arguments": {"resource": REPO, "argv": ["sh", "-c", script]},
    }


def action() -> Action:
    return Action.model_validate(
        {
            "name": "local/tidy",
            "prompt": "tidy the repository",
            "resources": [REPO],
            "decisions": [
                {
                    "key": "strategy",
                    "type": "strategy_choice",
                    "question": "How?",
                    "alternatives": [{"option": "by hand", "match": ["hand"]}],
                },
                {
                    "key": "prepare",
                    "type": "tool_invocation",
                    "parent": "strategy",
                    "question": "Prepare?",
                    "alternatives": [{"option": "prepare", "tool_calls": [command(PREPARE)]}],
                },
                {
                    "key": "work",
                    "type": "tool_invocation",
                    "parent": "strategy",
                    "question": "Work?",
                    "alternatives": [
                        {"option": "work it", "match": ["work"], "tool_calls": [command(WORK)]}
                    ],
                },
            ],
        }
    )


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def test_a_reverted_step_replays_against_empty_folders_ignored_files_and_modes(
    tmp_path: Path, sqlite_store: Store, options: RunOptions
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "Test")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=REPO, kind="git", location=str(repo), sandbox_strategy="git_worktree"
            )
        )
        uow.commit()
    plan = start_plan(sqlite_store, action(), profile_override="auto", options=options)
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert outcomes(sqlite_store, plan.plan_id) == {"prepare": True, "work": True}
    work = decision_id(sqlite_store, plan.plan_id, "work")
    impact = preview(sqlite_store, work, CorrectionMode.REVERT, "work it again")
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status is CorrectionStatus.SUCCEEDED
    # The replayed command found the folder, no later.log and the 600 it needs.
    assert outcomes(sqlite_store, plan.plan_id) == {"prepare": True, "work": True}


def decision_id(store: Store, plan_id: str, key: str) -> str:
    with store.unit_of_work() as uow:
        [found] = [
            d.decision_id
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.step_key == key
        ]
    return found


def outcomes(store: Store, plan_id: str) -> dict[str, bool | None]:
    """Whether each live step's command exited 0."""
    with store.unit_of_work() as uow:
        return {
            d.step_key: uow.tool_invocations.for_decision(d.decision_id)[0].ok
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.step_key in ("prepare", "work")
        }
