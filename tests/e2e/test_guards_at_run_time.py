"""A profile's guards stop each call they name in a running plan, and the person asked sees
the call (engine/core/tool_calls.py, engine/run/steps.py).

A plan writes two files, one per Execute decision, under a ``ci`` copy with one guard set.
Each guard stops the first call; the approval names the file it writes. Before, an approval
was of the tool: approving the first write let every later call of it run unasked (a deny
list said "always requires approval"), and the question named the tool alone, so an approver
could not see what was about to run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.engine.run.approvals import answer_approval
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.e2e.test_limits_at_run_time import files, pending, register, tool_calls

FILES = {"a.txt": "first\nof two\n", "b.txt": "second"}  # summed up; shown whole
NAMES = [f"report-{n:02}.txt" for n in range(12)]  # an argv longer than a question shows


def two_writes() -> Action:
    """Two Execute decisions, each writing one file of FILES to ``local/files``."""
    return Action.model_validate(
        {
            "name": "local/two-writes",
            "prompt": "Write two files",
            "resources": ["local/files"],
            "tools": ["local/write-file", "local/read-file"],
            "decisions": [
                {
                    "key": path.split(".")[0],
                    "type": "implementation_choice",
                    "question": f"Write {path}",
                    "alternatives": [
                        {
                            "option": f"write {path}",
                            "tool_calls": [
                                {
                                    "tool": "local/write-file",
                                    "arguments": {
                                        "resource": "local/files",
                                        "path": path,
                                        "content": content,
                                    },
                                }
                            ],
                        }
                    ],
                }
                for path, content in FILES.items()
            ],
        }
    )


GUARDS: dict[str, tuple[dict[str, Any], str]] = {
    "tool_denylist": ({"tool_denylist": ["local/write-file"]}, "is on the deny list"),
    "tool_allowlist": ({"tool_allowlist": ["local/read-file"]}, "is not on the allow list"),
    "require_approval_for_writes": (
        {"require_approval_for_writes": True},
        "(require_approval_for_writes)",
    ),
    "max_tool_calls_per_step": ({"max_tool_calls_per_step": 0}, "(max_tool_calls_per_step)"),
    "max_total_cost": ({"max_total_cost": 0}, "(max_total_cost)"),
}


@pytest.mark.parametrize("guard", list(GUARDS))
def test_a_guard_asks_before_each_call_it_stops_naming_the_call(
    sqlite_store: Store, options: RunOptions, tmp_path: Path, guard: str
) -> None:
    guards, reason = GUARDS[guard]
    profile = register(sqlite_store, "guarded", guards=guards)
    folder = files(sqlite_store, tmp_path)

    plan = start_plan(sqlite_store, two_writes(), profile_override=profile, options=options)

    for made, (path, content) in enumerate(FILES.items()):
        assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
        assert tool_calls(sqlite_store, plan) == ["local/write-file"] * made  # not made yet
        [asked] = pending(sqlite_store, plan)
        assert asked.kind is ApprovalKind.GUARD
        call, why = asked.question.split(")? ")
        assert call.startswith("Allow local/write-file (resource: local/files; "), call
        assert f"; path: {path}" in call and f"content: {content.splitlines()[0]}" in call
        assert reason in why
        answer_approval(sqlite_store, asked.approval_id, approve=True, by="alice")
        plan = resume_plan(sqlite_store, plan.plan_id, options)

    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    assert {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()} == FILES


def test_the_cli_lists_a_blocked_command_with_its_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agents approval list`: an approver reads the command a deny-listed tool would run,
    and the guard's reason whole after a long one (the list cut the question at 200)."""
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    store = Store.open(f"sqlite:///{tmp_path / 'agents.db'}")
    files(store, tmp_path)
    profile = register(store, "no-commands", guards={"tool_denylist": ["local/run-command"]})
    command = {
        "tool": "local/run-command",
        "arguments": {"resource": "local/files", "argv": ["touch", "made by it.txt", *NAMES]},
    }
    action = Action.model_validate(
        {
            "name": "local/command",
            "prompt": "Run a command",
            "resources": ["local/files"],
            "tools": ["local/run-command"],
            "decisions": [
                {
                    "key": "run",
                    "type": "implementation_choice",
                    "question": "Run it?",
                    "alternatives": [{"option": "run it", "tool_calls": [command]}],
                }
            ],
        }
    )
    plan = start_plan(store, action, profile_override=profile, options=RunOptions())
    assert plan.state is PlanState.AWAITING_APPROVAL

    listed = CliRunner().invoke(cli, ["--db", str(tmp_path / "agents.db"), "approval", "list"])

    assert listed.exit_code == 0, listed.output
    assert (
        "Allow local/run-command (resource: local/files; argv: touch 'made by it.txt' "
    ) in listed.output
    assert (
        "…)? plan guard: tool 'local/run-command' is on the deny list and always requires "
        "approval\n"
    ) in listed.output
