"""After a correction has rolled the resources back there is no way back (a database's
ROLLBACK TO SAVEPOINT cannot be undone): the rest is carried forward, each step tried again
when it fails, and a failure that persists is reported as what it is."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionIncompleteError
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store


@pytest.fixture
def waiting(tmp_path: Path, sqlite_store: Store) -> tuple[DemoEnvironment, Plan, RunOptions]:
    env = build_demo(sqlite_store, tmp_path / "demo")
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        sqlite_store, load_action(str(env.action_file)), profile_override="auto", options=options
    )
    return env, plan, options


def _correct(store: Store, plan: Plan, options: RunOptions) -> object:
    with store.unit_of_work() as uow:
        target = next(
            d.decision_id
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.step_key == "implement-function"
        )
    impact = preview(store, target, CorrectionMode.REVERT, "a greeter class")
    return execute(store, impact, acknowledged=True, requested_by="ana", options=options)


@pytest.mark.parametrize("fault", ["correction.supersede#1", "saver.put#1", "correction.finish#1"])
def test_a_step_failing_once_after_the_rollback_is_tried_again_and_the_correction_completes(
    waiting: tuple[DemoEnvironment, Plan, RunOptions],
    sqlite_store: Store,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    _, plan, options = waiting
    monkeypatch.setenv(failpoints.ENV_VAR, f"{fault}=raise")
    failpoints.reset()
    result = _correct(sqlite_store, plan, options)
    assert failpoints.hits().get(fault.split("#")[0], 0) >= 2  # failed once, then again
    details = show_plan(sqlite_store, plan.plan_id)
    [correction] = details.corrections
    assert correction.status is CorrectionStatus.SUCCEEDED
    assert details.summary.plan.state is PlanState.AWAITING_APPROVAL  # replayed to the gate
    assert result is not None


def test_a_step_that_keeps_failing_is_reported_with_what_was_rolled_back(
    waiting: tuple[DemoEnvironment, Plan, RunOptions],
    sqlite_store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env, plan, options = waiting
    monkeypatch.setenv(failpoints.ENV_VAR, "correction.supersede=raise")
    failpoints.reset()
    with pytest.raises(CorrectionIncompleteError, match="the resources were rolled back"):
        _correct(sqlite_store, plan, options)
    assert failpoints.hits()["correction.supersede"] == 3
    details = show_plan(sqlite_store, plan.plan_id)
    [correction] = details.corrections
    assert correction.status is CorrectionStatus.FAILED
    assert details.summary.plan.state is PlanState.ERRORED
    branches = subprocess.run(
        ["git", "-C", str(env.repository), "branch", "--list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "cleveragents/apply" not in branches  # nothing landed anywhere


def test_a_plan_left_errored_mid_correction_is_not_run_on_but_the_correction_is_run_again(
    waiting: tuple[DemoEnvironment, Plan, RunOptions],
    sqlite_store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, plan, options = waiting
    monkeypatch.setenv(failpoints.ENV_VAR, "correction.supersede=raise")
    failpoints.reset()
    with pytest.raises(CorrectionIncompleteError):
        _correct(sqlite_store, plan, options)
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()

    with pytest.raises(UserError, match="run the correction again: agents plan correct") as refused:
        resume_plan(sqlite_store, plan.plan_id, options)
    assert "--guidance 'a greeter class'" in str(refused.value)

    _correct(sqlite_store, plan, options)  # what the message says to do
    details = show_plan(sqlite_store, plan.plan_id)
    assert [c.status for c in details.corrections] == [
        CorrectionStatus.FAILED,
        CorrectionStatus.SUCCEEDED,
    ]
    assert details.summary.plan.state is PlanState.AWAITING_APPROVAL
