"""`agents action validate/create` check each scripted tool call's arguments as the tool will.

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
