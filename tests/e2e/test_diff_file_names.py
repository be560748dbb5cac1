"""A correction's diff handles every file name (issue 20, item 4).

A name may hold a line break, a tab, a quote, a leading dash, or bytes that are not UTF-8.
On the git and folder-copy strategies, `agents plan diff --correction` lists each such file on one
line, quoted and escaped as git shows it, with its contents — never refusing the resource
for one name — and the JSON document gives the exact name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.reconcile import OutsideChoice
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.e2e.test_tree_tools_exact import git

RES = "local/names"
# name -> how the diff shows it
NAMES = {
    "odd\nname.txt": '"odd\\nname.txt"',
    "tab\there.txt": '"tab\\there.txt"',
    'say "hi".txt': '"say \\"hi\\".txt"',
    "-leading-dash.txt": "-leading-dash.txt",
    "café.txt": "café.txt",
}
NOT_UTF8 = b"latin-\xff.txt"  # written by hand, outside the plan


def call(path: str, content: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": RES, "path": path, "content": content},
    }


def action() -> Action:
    return Action.model_validate(
        {
            "name": "local/names",
            "prompt": "write files with odd names",
            "resources": [RES],
            "decisions": [
                {
                    "key": "names",
                    "type": "implementation_choice",
                    "question": "What do the files say?",
                    "alternatives": [
                        {
                            "option": "one",
                            "match": ["one"],
                            "tool_calls": [call(n, "one\n") for n in NAMES],
                        },
                        {
                            "option": "two",
                            "match": ["two"],
                            "tool_calls": [call(n, "two\n") for n in NAMES],
                        },
                    ],
                }
            ],
        }
    )


def register(store: Store, tmp_path: Path, strategy: str) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "keep.txt").write_text("keep\n")
    if strategy == "git_worktree":
        git(real, "init", "-q", "-b", "main")
        git(real, "config", "user.email", "t@example.invalid")
        git(real, "config", "user.name", "Test")
        git(real, "add", "-A")
        git(real, "commit", "-q", "-m", "initial")
    kind = "git" if strategy == "git_worktree" else "filesystem"
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(resource_id=RES, kind=kind, location=str(real), sandbox_strategy=strategy)
        )
        uow.commit()


# The overlay is left out: its rollback drops the layers above the target, the safety
# checkpoint with them, so its diff has no old attempt to compare (whatever the names).
@pytest.mark.parametrize("strategy", ["git_worktree", "filesystem_copy"])
def test_every_file_name_is_in_the_diff_escaped_on_one_line(
    tmp_path: Path, sqlite_store: Store, options: RunOptions, strategy: str
) -> None:
    # Given a plan that wrote files with odd names, and a file whose name is not UTF-8
    # written by hand in its sandbox
    register(sqlite_store, tmp_path, strategy)
    plan = start_plan(sqlite_store, action(), profile_override="auto", options=options)
    assert plan.state is PlanState.AWAITING_APPROVAL
    workdir = PlanSandboxes(sqlite_store, plan.plan_id, options.sandbox_base).get(RES).workdir
    assert workdir is not None
    (workdir / NOT_UTF8.decode("utf-8", "surrogateescape")).write_bytes(b"by hand\n")
    with sqlite_store.unit_of_work() as uow:
        decision = next(
            d.decision_id
            for d in uow.decisions.for_plan(plan.plan_id, include_superseded=False)
            if d.step_key == "names"
        )

    # When the decision is corrected to the other contents (the hand-written file discarded)
    impact = preview(sqlite_store, decision, CorrectionMode.REVERT, "two")
    result = execute(
        sqlite_store,
        impact,
        acknowledged=True,
        requested_by="ana",
        options=options,
        outside=OutsideChoice.DISCARD,
    )
    assert result.correction.status is CorrectionStatus.SUCCEEDED
    correction = result.correction.correction_id

    # Then the diff lists every file, each name on one line, escaped, with its change
    db = str(sqlite_store.engine.url.database)
    shown = CliRunner().invoke(cli, ["--db", db, "plan", "diff", "--correction", correction])
    assert shown.exit_code == 0, shown.output
    for name, escaped in NAMES.items():
        assert f"--- old/{escaped}\n+++ new/{escaped}\n" in shown.output, (name, shown.output)
    assert shown.output.count("-one\n+two\n") == 2 * len(NAMES)  # both comparisons
    assert '--- old/"latin-\\xff.txt"\n' in shown.output  # gone: it was discarded
    assert not [c for c in shown.output if ord(c) < 32 and c not in "\n"]

    # And the JSON document gives each exact name (bytes that are not UTF-8 in hex)
    doc = json.loads(
        CliRunner()
        .invoke(cli, ["--db", db, "plan", "diff", "--correction", correction, "--format=json"])
        .output
    )
    (resource,) = doc["resources"]
    assert resource["note"] is None
    paths = {c["path"]: c.get("path_bytes") for c in resource["changes"]}
    assert {p for p, raw in paths.items() if raw is None} == set(NAMES)
    assert paths["latin-\ufffd.txt"] == NOT_UTF8.hex()
