"""Reconciliation: files changed in a sandbox by someone else while the plan waited are
noticed before the plan goes on, named in an approval, and kept or discarded as answered."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.approval import ApprovalAnswer, ApprovalKind
from cleveragents_tui.domain.enums import CorrectionMode, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationGuard
from cleveragents_tui.engine.core.reconcile import SEAL_FILE, compare, scan
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.read.tui_queries import recent_events
from cleveragents_tui.engine.run.approvals import answer_approval, pending_approvals
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store

GREET = "hello_cli/greet.py"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def waiting(tmp_path: Path, sqlite_store: Store) -> tuple[DemoEnvironment, Plan, RunOptions, Path]:
    """The demo plan waiting at its Apply gate, and the folder of its git sandbox."""
    env = build_demo(sqlite_store, tmp_path / "demo")
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        sqlite_store, load_action(str(env.action_file)), profile_override="auto", options=options
    )
    assert plan.state is PlanState.AWAITING_APPROVAL
    sandbox = PlanSandboxes(sqlite_store, plan.plan_id, options.sandbox_base)
    workdir = sandbox.get(f"{env.namespace}/hello-cli").workdir
    assert workdir is not None
    return env, plan, options, workdir


def _event_kinds(store: Store, plan_id: str) -> list[str]:
    return [e.kind for e in recent_events(store, plan_id, limit=100)]


def _edit_outside(workdir: Path) -> bytes:
    """What a person does in the sandbox while the plan waits; returns the plan's greet.py."""
    plans_version = (workdir / GREET).read_bytes()
    (workdir / GREET).write_text("def hello(name):\n    return 'hacked'\n", "utf-8")
    (workdir / "notes" / "todo").mkdir(parents=True)
    (workdir / "notes" / "todo" / "NOTES.md").write_text("remember\n", "utf-8")
    return plans_version


@pytest.mark.parametrize("answer", [ApprovalAnswer.APPROVED, ApprovalAnswer.DENIED])
def test_changes_made_while_the_plan_waited_are_named_then_kept_or_discarded(
    waiting: tuple[DemoEnvironment, Plan, RunOptions, Path],
    sqlite_store: Store,
    answer: ApprovalAnswer,
) -> None:
    env, plan, options, workdir = waiting
    plans_version = _edit_outside(workdir)

    stopped = apply_plan(sqlite_store, plan.plan_id, "ana", options)
    assert stopped.state is PlanState.AWAITING_APPROVAL  # not applied: a person decides first
    [asked] = pending_approvals(sqlite_store, plan.plan_id)
    assert asked.kind is ApprovalKind.RECONCILE
    assert f"{GREET} (modified)" in asked.question
    assert "notes/todo/NOTES.md (added)" in asked.question
    assert "sandbox_changed_outside" in _event_kinds(sqlite_store, plan.plan_id)
    assert "cleveragents/apply" not in git(env.repository, "branch", "--list")

    answer_approval(
        sqlite_store,
        asked.approval_id,
        approve=answer is ApprovalAnswer.APPROVED,
        by="ana",
        reason="checked it",
    )
    applied = resume_plan(sqlite_store, plan.plan_id, options)

    assert applied.state is PlanState.APPLIED
    branch = f"cleveragents/apply/{plan.plan_id}"
    landed = git(env.repository, "show", f"{branch}:{GREET}").encode()
    files = git(env.repository, "ls-tree", "-r", "--name-only", branch).split()
    if answer is ApprovalAnswer.APPROVED:
        assert "hacked" in landed.decode() and "notes/todo/NOTES.md" in files
    else:
        assert landed == plans_version and "notes/todo/NOTES.md" not in files
    kinds = _event_kinds(sqlite_store, plan.plan_id)
    expected = (
        "outside_changes_kept" if answer is ApprovalAnswer.APPROVED else "outside_changes_discarded"
    )
    assert expected in kinds


def test_nothing_changed_outside_means_nothing_is_asked(
    waiting: tuple[DemoEnvironment, Plan, RunOptions, Path], sqlite_store: Store
) -> None:
    _, plan, options, _ = waiting
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED


def test_a_correction_rolling_the_sandbox_back_is_not_taken_for_an_outside_change(
    waiting: tuple[DemoEnvironment, Plan, RunOptions, Path], sqlite_store: Store
) -> None:
    _, plan, options, _ = waiting
    with sqlite_store.unit_of_work() as uow:
        target = next(
            d.decision_id
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.step_key == "implement-function"
        )
    impact = preview(sqlite_store, target, CorrectionMode.REVERT, "a greeter class")
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.plan.state is PlanState.AWAITING_APPROVAL
    [gate] = pending_approvals(sqlite_store, plan.plan_id)
    assert gate.kind is ApprovalKind.APPLY_GATE


def test_the_listing_sees_content_mode_symlink_and_folder_changes(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("one", "utf-8")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n", "utf-8")
    os.symlink("a/f.txt", tmp_path / "link")
    (tmp_path / ".git").write_text("gitdir: elsewhere\n", "utf-8")
    sealed = scan(tmp_path)
    assert ".git" not in sealed
    assert compare("r/x", sealed, scan(tmp_path)) is None

    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "link").unlink()
    os.symlink("run.sh", tmp_path / "link")
    (tmp_path / "a" / "f.txt").unlink()
    (tmp_path / "a").rmdir()
    (tmp_path / "b").mkdir()
    change = compare("r/x", sealed, scan(tmp_path))
    assert change is not None
    assert change.added == ("b",)
    assert change.deleted == ("a", "a/f.txt")
    assert set(change.modified) >= {"run.sh"}
    assert change.summary(limit=2).endswith("+3 more")


@pytest.fixture
def guarded(tmp_path: Path, sqlite_store: Store) -> tuple[DemoEnvironment, Plan, RunOptions, Path]:
    """The demo plan under a profile whose Apply needs no approval (ci), paused by a guard
    at its test run: the sandbox is sealed with the command and the test written, and the
    run that follows the approval goes on to an automatic Apply."""
    ci = ProfileRegistry(sqlite_store).get("ci")
    guard = AutomationGuard(tool_denylist=("local/run-tests",))
    ProfileRegistry(sqlite_store).add(
        ci.model_copy(update={"name": "team/guarded-ci", "guards": guard})
    )
    env = build_demo(sqlite_store, tmp_path / "demo")
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        sqlite_store,
        load_action(str(env.action_file)),
        profile_override="team/guarded-ci",
        options=options,
    )
    [asked] = pending_approvals(sqlite_store, plan.plan_id)
    assert asked.kind is ApprovalKind.GUARD
    workdir = (
        PlanSandboxes(sqlite_store, plan.plan_id, options.sandbox_base)
        .get(f"{env.namespace}/hello-cli")
        .workdir
    )
    assert workdir is not None
    answer_approval(sqlite_store, asked.approval_id, approve=True, by="ana")
    return env, plan, options, workdir


def test_the_plans_own_writes_after_a_guard_are_not_taken_for_outside_changes(
    guarded: tuple[DemoEnvironment, Plan, RunOptions, Path], sqlite_store: Store
) -> None:
    env, plan, options, _ = guarded
    # The approved run writes (the tests leave __pycache__ behind, a database row, a
    # notification) and goes on to Apply on its own: nothing is asked about its own work.
    applied = resume_plan(sqlite_store, plan.plan_id, options)
    assert applied.state is PlanState.APPLIED, pending_approvals(sqlite_store, plan.plan_id)
    assert "sandbox_changed_outside" not in _event_kinds(sqlite_store, plan.plan_id)
    files = git(
        env.repository, "ls-tree", "-r", "--name-only", f"cleveragents/apply/{plan.plan_id}"
    )
    assert "tests/test_hello.py" in files.split()


def test_an_outside_edit_is_still_named_alone_and_kept_through_the_automatic_apply(
    guarded: tuple[DemoEnvironment, Plan, RunOptions, Path], sqlite_store: Store
) -> None:
    env, plan, options, workdir = guarded
    (workdir / "NOTES.md").write_text("edited by ana while the plan waited\n", "utf-8")

    stopped = resume_plan(sqlite_store, plan.plan_id, options)
    assert stopped.state is PlanState.AWAITING_APPROVAL
    [asked] = pending_approvals(sqlite_store, plan.plan_id)
    assert asked.kind is ApprovalKind.RECONCILE
    assert asked.question.count("(added)") == 1 and "NOTES.md (added)" in asked.question
    answer_approval(sqlite_store, asked.approval_id, approve=True, by="ana")

    applied = resume_plan(sqlite_store, plan.plan_id, options)
    assert applied.state is PlanState.APPLIED, pending_approvals(sqlite_store, plan.plan_id)
    assert _event_kinds(sqlite_store, plan.plan_id).count("sandbox_changed_outside") == 1
    files = git(
        env.repository, "ls-tree", "-r", "--name-only", f"cleveragents/apply/{plan.plan_id}"
    )
    assert {"NOTES.md", "tests/test_hello.py"} <= set(files.split())


@pytest.mark.parametrize("seal", ["as written now", "written before seals named their folder"])
def test_a_revert_preview_names_the_files_changed_outside_the_plan(
    waiting: tuple[DemoEnvironment, Plan, RunOptions, Path], sqlite_store: Store, seal: str
) -> None:
    """The preview compares the sealed sandbox folder with its seal without opening the
    sandbox (the seal names the folder); a seal from before that opens it, as before."""
    env, plan, options, workdir = waiting
    assert options.sandbox_base is not None
    seals = options.sandbox_base / plan.plan_id / SEAL_FILE
    if seal != "as written now":
        data = json.loads(seals.read_text("utf-8"))
        for sealed in data["resources"].values():
            del sealed["folder"]
        seals.write_text(json.dumps(data), "utf-8")
    _edit_outside(workdir)
    with sqlite_store.unit_of_work() as uow:
        target = next(
            d.decision_id
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.step_key == "implement-function"
        )

    impact = preview(
        sqlite_store,
        target,
        CorrectionMode.REVERT,
        "a greeter class",
        sandbox_base=options.sandbox_base,
    )

    [changes] = impact.outside_changes
    assert changes.resource_id == f"{env.namespace}/hello-cli"
    assert changes.modified == (GREET,)
    assert changes.added == ("notes", "notes/todo", "notes/todo/NOTES.md")
