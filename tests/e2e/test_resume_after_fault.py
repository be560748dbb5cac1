"""A run that stops between a decision and its tool calls (a failed write, a crash, a guard)
finishes those calls when it is resumed: nothing the decision called for is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.profile import AutomationGuard
from cleveragents_tui.engine.core.checkpoints import CheckpointGroupError
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run.approvals import answer_approval, pending_approvals
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store


def _calls_by_step(store: Store) -> dict[str, int]:
    """Tool invocations per decision key, over every plan of the store."""
    counts: dict[str, int] = {}
    with store.unit_of_work() as uow:
        for plan in uow.plans.all():
            for decision in uow.decisions.for_plan(plan.plan_id, include_superseded=False):
                if decision.phase is Phase.EXECUTE and decision.step_key:
                    calls = uow.tool_invocations.for_decision(decision.decision_id)
                    counts[decision.step_key] = len(calls)
    return counts


def _run_demo(tmp: Path, fault: str | None, monkeypatch: pytest.MonkeyPatch) -> Store:
    tmp.mkdir()
    store = Store.open(str(tmp / "agents.db"))
    env = build_demo(store, tmp / "demo")
    options = RunOptions(sandbox_base=tmp / "sandboxes")
    action = load_action(str(env.action_file))
    if fault is None:
        plan = start_plan(store, action, profile_override="auto", options=options)
    else:
        monkeypatch.setenv(failpoints.ENV_VAR, fault)
        failpoints.reset()
        with pytest.raises((failpoints.InjectedFault, CheckpointGroupError)):
            start_plan(store, action, profile_override="auto", options=options)
        monkeypatch.delenv(failpoints.ENV_VAR)
        failpoints.reset()
        with store.unit_of_work() as uow:
            [plan] = [p for p in uow.plans.all() if p.parent_plan_id is None]
        plan = resume_plan(store, plan.plan_id, options)
    assert plan.state is PlanState.AWAITING_APPROVAL  # at the Apply gate
    return store


@pytest.mark.parametrize("nth", [2, 3, 4, 5])
def test_tool_calls_after_a_failed_git_call_run_when_the_plan_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nth: int
) -> None:
    """The Nth git object write fails: some land in a checkpoint group (no decision), some in
    the pre-write checkpoint of a tool call (decision recorded, call not made)."""
    clean = _run_demo(tmp_path / "clean", None, monkeypatch)
    faulted = _run_demo(tmp_path / "faulted", f"git.call@hash-object#{nth}=raise", monkeypatch)
    try:
        expected = _calls_by_step(clean)
        assert sum(expected.values()) >= 3
        assert _calls_by_step(faulted) == expected
    finally:
        clean.close()
        faulted.close()


def test_a_tool_call_a_guard_held_runs_once_it_is_approved(
    tmp_path: Path, sqlite_store: Store
) -> None:
    """The guard stops `local/notify` after its decision was recorded; approving it and
    running the plan again makes the call (it used to be skipped with the re-run step)."""
    auto = ProfileRegistry(sqlite_store).get("auto")
    guarded = auto.model_copy(
        update={"name": "team/guarded", "guards": AutomationGuard(tool_denylist=("local/notify",))}
    )
    ProfileRegistry(sqlite_store).add(guarded)
    env = build_demo(sqlite_store, tmp_path / "demo")
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        sqlite_store,
        load_action(str(env.action_file)),
        profile_override="team/guarded",
        options=options,
    )
    [asked] = pending_approvals(sqlite_store, plan.plan_id)
    assert asked.kind is ApprovalKind.GUARD and asked.question.startswith("Allow local/notify (")
    assert not list(env.outbox.glob("*"))  # nothing sent yet

    answer_approval(sqlite_store, asked.approval_id, approve=True, by="ana")
    resumed = resume_plan(sqlite_store, plan.plan_id, options)

    assert resumed.state is PlanState.AWAITING_APPROVAL  # now at the Apply gate
    with sqlite_store.unit_of_work() as uow:
        announce = next(d for d in uow.decisions.for_plan(plan.plan_id) if d.step_key == "announce")
        calls = uow.tool_invocations.for_decision(announce.decision_id)
    assert [c.tool for c in calls] == ["local/notify"]
    assert len(list(env.outbox.glob("*"))) == 1  # sent exactly once


@pytest.mark.parametrize("fault", ["git.call@worktree#1", "git.call@update-ref#1"])
def test_a_sandbox_left_half_made_is_made_again_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    """The git sandbox's creation stops between its refs and its worktree (or before its
    baseline): resuming clears what it left and makes it again."""
    clean = _run_demo(tmp_path / "clean", None, monkeypatch)
    faulted = _run_demo(tmp_path / "faulted", f"{fault}=raise", monkeypatch)
    try:
        assert _calls_by_step(faulted) == _calls_by_step(clean)
    finally:
        clean.close()
        faulted.close()
