"""The tree tools in a running plan, on every strategy with files: a revert before them
restores the exact prior state, and Apply lands what they made (issue 20, item 6).

The plan writes ``first.txt``, then reshapes the tree with every tool a plan has for it:
bytes through ``write-file`` (base64), a file and a folder moved, a folder deleted, an empty
folder made, two symlinks, three modes. The oracle of "the exact prior state" is a plan of
the same action that chose to leave the tree alone: a revert of the reshaping must leave the
sandbox exactly as that plan's (paths, kinds, bytes, modes, link targets, empty folders).
"""

from __future__ import annotations

import base64
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
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.sandbox.overlay import EntryKind, OverlaySandbox
from cleveragents_tui.store.store import Store

RES = "local/tree"
STRATEGIES = ["git_worktree", "filesystem_copy", "overlay"]
BLOB = bytes(range(256)) * 3 + b"\x00\xff\x00"  # not UTF-8, NULs included
LEAVE = "leave the tree unchanged"

# What each resource starts with: path -> (mode, content); folders are made as needed.
START = {
    "app.py": (0o644, b"print('hi')\n"),
    "run.sh": (0o755, b"#!/bin/sh\necho run\n"),
    "old/notes.txt": (0o644, b"notes\n"),
    "old/deep/a.txt": (0o644, b"a\n"),
    "trash/junk.txt": (0o644, b"junk\n"),
    "trash/more/junk2.txt": (0o644, b"junk 2\n"),
}

Snapshot = dict[str, tuple[str, int, bytes]]  # path -> (kind, mode, bytes or link target)


def call(tool: str, **arguments: str) -> dict[str, Any]:
    return {"tool": tool, "arguments": {"resource": RES, **arguments}}


RESHAPE = [
    call(
        "local/write-file",
        path="assets/logo.bin",
        content=base64.b64encode(BLOB).decode(),
        encoding="base64",
    ),
    call("local/move", **{"from": "app.py", "to": "src/app.py"}),
    call("local/move", **{"from": "old", "to": "new"}),
    call("local/delete", path="trash"),
    call("local/mkdir", path="empty/inner", mode="0750"),
    call("local/symlink", path="latest", target="new/notes.txt"),
    call("local/symlink", path="new/deep/up", target="../../src/app.py"),
    call("local/chmod", path="src/app.py", mode="0600"),
    call("local/chmod", path="run.sh", mode="0700"),
    call("local/chmod", path="new/deep", mode="0700"),
]

# What the reshaping leaves, on top of first.txt: path -> (kind, mode, bytes or target).
RESHAPED: Snapshot = {
    "first.txt": ("file", 0o644, b"first\n"),
    "assets": ("folder", 0o755, b""),
    "assets/logo.bin": ("file", 0o644, BLOB),
    "src": ("folder", 0o755, b""),
    "src/app.py": ("file", 0o600, b"print('hi')\n"),
    "run.sh": ("file", 0o700, b"#!/bin/sh\necho run\n"),
    "new": ("folder", 0o755, b""),
    "new/notes.txt": ("file", 0o644, b"notes\n"),
    "new/deep": ("folder", 0o700, b""),
    "new/deep/a.txt": ("file", 0o644, b"a\n"),
    "new/deep/up": ("symlink", 0, b"../../src/app.py"),
    "empty": ("folder", 0o755, b""),
    "empty/inner": ("folder", 0o750, b""),
    "latest": ("symlink", 0, b"new/notes.txt"),
}


def action(*, leave: bool = False) -> Action:
    return Action.model_validate(
        {
            "name": "local/reshape",
            "prompt": "reshape the tree",
            "resources": [RES],
            "decisions": [
                {
                    "key": "first",
                    "type": "implementation_choice",
                    "question": "Start with a file?",
                    "alternatives": [
                        {
                            "option": "first.txt",
                            "tool_calls": [
                                call("local/write-file", path="first.txt", content="first\n")
                            ],
                        }
                    ],
                },
                {
                    "key": "reshape",
                    "type": "implementation_choice",
                    "question": "Reshape the tree?",
                    "choose": "leave the tree as it is" if leave else "reshape the tree",
                    "alternatives": [
                        {
                            "option": "reshape the tree",
                            "match": ["reshape", "move"],
                            "tool_calls": RESHAPE,
                        },
                        {"option": "leave the tree as it is", "match": ["leave", "unchanged"]},
                    ],
                },
            ],
        }
    )


def make_tree(folder: Path) -> Path:
    folder.mkdir()
    for path, (mode, data) in START.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)
    for each in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
        each.chmod(0o755)
    return folder


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def register(store: Store, tmp_path: Path, strategy: str) -> Path:
    real = make_tree(tmp_path / "real")
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
    return real


def folder_snapshot(root: Path) -> Snapshot:
    """Every path below ``root`` (not a top ``.git``), no symlink followed."""
    found: Snapshot = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            continue
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            found[rel] = ("symlink", 0, os.fsencode(os.readlink(path)))
        elif stat.S_ISDIR(st.st_mode):
            found[rel] = ("folder", stat.S_IMODE(st.st_mode), b"")
        else:
            found[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return found


def sandbox_snapshot(store: Store, plan: Plan, options: RunOptions) -> Snapshot:
    assert options.sandbox_base is not None
    sandbox = PlanSandboxes(store, plan.plan_id, options.sandbox_base).get(RES)
    if not isinstance(sandbox, OverlaySandbox):
        assert sandbox.workdir is not None
        return folder_snapshot(sandbox.workdir)
    found: Snapshot = {}
    for entry in sandbox.walk():
        if entry.kind is EntryKind.SYMLINK:
            found[entry.path] = ("symlink", 0, os.fsencode(sandbox.read_link(entry.path)))
        elif entry.kind is EntryKind.DIRECTORY:
            found[entry.path] = ("folder", entry.mode, b"")
        else:
            found[entry.path] = ("file", entry.mode, sandbox.read_bytes(entry.path))
    return dict(sorted(found.items()))


def branch_snapshot(repo: Path, plan_id: str) -> dict[str, tuple[str, bytes]]:
    """Git mode and content (a link's target) of every path of the branch Apply made."""
    ref = f"cleveragents/apply/{plan_id}"
    found = {}
    for line in git(repo, "ls-tree", "-r", "-z", ref).split(b"\0"):
        if line:
            meta, path = line.split(b"\t", 1)
            mode, _, blob = meta.decode().split()
            found[path.decode()] = (mode, git(repo, "cat-file", "blob", blob))
    return found


def expected_branch(snapshot: Snapshot) -> dict[str, tuple[str, bytes]]:
    """What git keeps of ``snapshot``: files (executable or not) and links, no folders."""
    kept = {}
    for path, (kind, mode, data) in snapshot.items():
        if kind == "symlink":
            kept[path] = ("120000", data)
        elif kind == "file":
            kept[path] = ("100755" if mode & 0o100 else "100644", data)
    return kept


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def run_to_gate(store: Store, options: RunOptions, *, leave: bool = False) -> Plan:
    plan = start_plan(store, action(leave=leave), profile_override="auto", options=options)
    assert plan.state is PlanState.AWAITING_APPROVAL, plan
    return plan


def reshape_decision(store: Store, plan: Plan) -> str:
    with store.unit_of_work() as uow:
        current = uow.decisions.for_plan(plan.plan_id, include_superseded=False)
        return next(d.decision_id for d in current if d.step_key == "reshape")


@pytest.fixture(autouse=True)
def _umask() -> Any:
    """Folders a tool makes get exactly the mode asked for, whatever the runner's umask."""
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_apply_lands_what_the_tree_tools_made(
    tmp_path: Path, sqlite_store: Store, options: RunOptions, strategy: str
) -> None:
    # Given a plan that reshaped the tree with every tree tool
    real = register(sqlite_store, tmp_path, strategy)
    plan = run_to_gate(sqlite_store, options)
    # Then its sandbox holds exactly the reshaped tree
    assert sandbox_snapshot(sqlite_store, plan, options) == RESHAPED
    # And Apply lands it: paths, bytes, modes, link targets, empty folders
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED
    if strategy == "git_worktree":  # a branch: files with their executable bit, and links
        assert branch_snapshot(real, plan.plan_id) == expected_branch(RESHAPED)
    else:
        assert folder_snapshot(real) == RESHAPED


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_revert_before_the_tree_tools_restores_the_exact_prior_state(
    tmp_path: Path, sqlite_store: Store, options: RunOptions, strategy: str
) -> None:
    # Given the oracle: a plan of the same action that left the tree alone
    real = register(sqlite_store, tmp_path, strategy)
    oracle = run_to_gate(sqlite_store, options, leave=True)
    prior = sandbox_snapshot(sqlite_store, oracle, options)
    assert "first.txt" in prior and "trash/more/junk2.txt" in prior
    # And a plan that reshaped the tree
    plan = run_to_gate(sqlite_store, options)
    assert sandbox_snapshot(sqlite_store, plan, options) == RESHAPED
    # When the reshaping is reverted with guidance that leaves the tree alone
    impact = preview(
        sqlite_store, reshape_decision(sqlite_store, plan), CorrectionMode.REVERT, LEAVE
    )
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status is CorrectionStatus.SUCCEEDED
    # Then the sandbox is exactly as before the reshaping: no moved, linked, made or
    # re-moded path is left, and the deleted folder is back with its bytes and modes
    assert sandbox_snapshot(sqlite_store, plan, options) == prior
    # And Apply lands only first.txt
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED
    if strategy == "git_worktree":
        assert branch_snapshot(real, plan.plan_id) == expected_branch(prior)
    else:
        assert folder_snapshot(real) == prior
