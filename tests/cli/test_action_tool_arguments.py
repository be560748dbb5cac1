"""`agents action validate/create` (and `plan use FILE`) check scripted tool calls' arguments as the tool will.

Before, a tool call with an argument the tool does not take (``command:`` for run-command's
``argv``, a misspelt ``pth:``), without one it needs, or with a value of the wrong kind (a
string for ``argv``) was reported "ok" and registered; the plan then failed that call at
Execute, retried it (the same arguments each time) and stopped for a person.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_bring_your_own import Run, home, repo, run

__all__ = ["home", "repo", "run"]  # the fixtures, as test_bring_your_own makes them

ACTION = """\
name: local/shop-args
prompt: Run the tests, then write a note
resources: [local/shop]
tools: [local/run-command, local/write-file]
decisions:
  - key: work
    type: implementation_choice
    question: What is done?
    alternatives:
      - option: test and note
        tool_calls:
          - tool: local/run-command
            arguments: {resource: local/shop, command: [pytest, -q]}
          - tool: local/run-command
            arguments: {resource: local/shop, argv: "pytest -q"}
          - tool: local/write-file
            arguments: {resource: local/shop, pth: NOTE.md, content: done}
          - tool: local/write-file
            arguments: {resource: local/shop, path: NOTE.md}
          - tool: local/write-file
            arguments: {resource: local/shop, path: NOTE.md, content: done}
"""
PARENT = """\
name: local/shop-parent
prompt: Have a child plan test the shop
resources: [local/shop]
decisions:
  - key: child
    type: subplan_spawn
    question: Who tests it?
    alternatives:
      - option: a child plan
        spawn: [local/shop-args]
subactions:
"""
VALID_CALLS = """\
          - tool: local/run-command
            arguments: {resource: local/shop, argv: [pytest, -q], timeout_seconds: 30}
          - tool: local/write-file
            arguments: {resource: local/shop, path: NOTE.md, content: done}
"""


def test_tool_call_arguments_the_tool_refuses_are_problems_with_their_line(
    run: Run, repo: Path, tmp_path: Path
) -> None:
    assert run("init").exit_code == 0
    action_file = tmp_path / "args.action.yaml"
    action_file.write_text(ACTION)
    where = "decisions.0.alternatives.0.tool_calls"

    checked = run("action", "validate", str(action_file))

    assert checked.exit_code == 2
    assert checked.stderr.strip().splitlines() == [
        f"{action_file}:13: {where}.0.arguments: local/run-command: unknown argument "
        "'command' (expected: resource, argv, timeout_seconds)",
        f"{action_file}:15: {where}.1.arguments: local/run-command: argument 'argv' must be "
        "a list of strings, not a string: commands run without a shell (to use one, pass it "
        "explicitly, e.g. ['sh', '-c', '...'])",
        f"{action_file}:17: {where}.2.arguments: local/write-file: unknown argument 'pth' "
        "(expected: resource, path, content, encoding, executable)",
        f"{action_file}:19: {where}.3.arguments: local/write-file: argument 'content' is "
        "required (the complete new content)",
        f"error: 4 problems in {action_file}: fix the action file (docs/actions.md)",
    ]
    created = run("action", "create", str(action_file))
    assert created.exit_code == 2 and len(created.stderr.strip().splitlines()) == 1
    assert json.loads(run("action", "list", "--format=json").output)["actions"] == []

    action_file.write_text(ACTION.split("          - tool:")[0] + VALID_CALLS)
    valid = run("action", "validate", str(action_file))
    assert valid.exit_code == 0, valid.stderr


def test_plan_use_of_a_file_refuses_arguments_the_tool_refuses(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    """Before: `plan use FILE` created the plan (and ran it to its first gate) with the bad
    call in it, to fail at Execute; now pre-flight refuses it, and nothing is stored."""
    assert run("init").exit_code == 0
    action_file = tmp_path / "args.action.yaml"
    action_file.write_text(ACTION)
    database = home / ".local" / "share" / "cleveragents" / "agents.db"
    before = database.read_bytes()

    used = run("plan", "use", str(action_file))

    assert used.exit_code == 2
    assert used.stderr.strip() == (
        "error: pre-flight check 'skill and tool existence' failed: decision work, alternative "
        "'test and note': local/run-command: unknown argument 'command' (expected: resource, "
        "argv, timeout_seconds): fix the call's arguments in the action file (`agents action "
        "validate` on it lists every problem with its line)"
    )
    assert database.read_bytes() == before
    assert json.loads(run("plan", "list", "--format=json").output)["plans"] == []


def test_plan_use_refuses_a_subactions_bad_arguments_before_the_plan_starts(
    run: Run, repo: Path, tmp_path: Path
) -> None:
    assert run("init").exit_code == 0
    action_file = tmp_path / "parent.action.yaml"
    child = "\n".join("    " + line for line in ACTION.splitlines())
    action_file.write_text(PARENT + "  - " + child[4:] + "\n")

    used = run("plan", "use", str(action_file))

    assert used.exit_code == 2 and len(used.stderr.strip().splitlines()) == 1
    assert "subaction local/shop-args: decision work, alternative 'test and note': " in used.stderr
    assert json.loads(run("plan", "list", "--format=json").output)["plans"] == []


FIXES = """\
name: local/shop-fix
prompt: Write the code, test it
resources: [local/shop]
decisions:
  - key: plan
    type: strategy_choice
    question: How?
    alternatives:
      - option: one file
        fix:
          - tool: local/edit-file
            arguments: {resource: local/shop, path: a.py, old: "-", new: "+"}
  - key: work
    type: implementation_choice
    question: What is done?
    alternatives:
      - option: code and test
        tool_calls:
          - tool: local/run-tests
            arguments: {resource: local/shop, argv: [pytest, -q]}
        fix:
          - tool: local/edit-file
            arguments: {resource: local/shop, path: a.py, new: "+"}
          - tool: local/edit-file
            arguments: {resource: local/elsewhere, path: a.py, old: "-", new: "+"}
"""


def test_a_fix_is_checked_as_tool_calls_are(run: Run, repo: Path, tmp_path: Path) -> None:
    assert run("init").exit_code == 0
    action_file = tmp_path / "fix.action.yaml"
    action_file.write_text(FIXES)
    where = "decisions.1.alternatives.0.fix"

    checked = run("action", "validate", str(action_file))

    assert checked.exit_code == 2
    assert checked.stderr.strip().splitlines() == [
        f"{action_file}:5: decisions.0: decision plan: only Execute decisions run validations "
        "to fix",
        f"{action_file}:23: {where}.0.arguments: local/edit-file: argument 'old' is required "
        "(the text to replace; it must occur exactly once)",
        f"{action_file}:25: {where}.1.arguments.resource: resource local/elsewhere is not one "
        "of the action's resources: add it to `resources`",
        f"error: 3 problems in {action_file}: fix the action file (docs/actions.md)",
    ]
