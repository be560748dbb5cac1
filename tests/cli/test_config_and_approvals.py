"""`agents config` and `agents approval` as a user drives them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.approval import Approval
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.store import Store
from tests.cli.conftest import Run


def test_config_set_get_unset_list(run: Run) -> None:
    assert run("config", "get", "core.automation-profile").exit_code == 1
    result = run("config", "set", "core.automation-profile", "cautious")
    assert result.exit_code == 0 and "core.automation-profile = cautious (global)" in result.output
    run("config", "set", "core.automation-profile", "trusted", "--project", "local/app")
    assert run("config", "get", "core.automation-profile").output.strip() == "cautious"
    assert (
        run("config", "get", "core.automation-profile", "--project", "local/app").output.strip()
        == "trusted"
    )
    listing = json.loads(run("config", "list", "--format=json").output)["settings"]
    assert {(s["scope"], s["value"]) for s in listing} == {
        ("global", "cautious"),
        ("project:local/app", "trusted"),
    }
    assert "unset" in run("config", "unset", "core.automation-profile").output
    assert run("config", "get", "core.automation-profile").exit_code == 1


def test_config_refuses_unknown_keys_and_profiles(run: Run) -> None:
    bad_key = run("config", "set", "core.colour", "blue")
    assert bad_key.exit_code == 2 and "unknown setting 'core.colour'" in bad_key.stderr
    bad_profile = run("config", "set", "core.automation-profile", "yolo")
    assert bad_profile.exit_code == 2 and "yolo" in bad_profile.stderr
    assert len(bad_profile.stderr.strip().splitlines()) == 1
    assert run("config", "list").output.startswith("No settings.")


def _stored_approval(run: Run, tmp_path: Path, **fields: Any) -> tuple[Store, Approval]:
    """A plan waiting on one approval made of ``fields``, in the database the CLI uses."""
    run("plan", "list")  # creates the database
    store = Store.open(str(tmp_path / "agents.db"))
    plan = Plan(action="local/x")
    approval = Approval(plan_id=plan.plan_id, **fields)
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.approvals.add(approval)
        uow.commit()
    return store, approval


def test_approvals_are_listed_answered_once_with_who_and_why(run: Run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store, approval = _stored_approval(
        run,
        tmp_path,
        kind="escalation",
        question="Send the notification?",
        details={
            "flag": "execute_command",
            "gates": "decisions during Execute",
            "confidence": 0.41,
            "threshold": 0.8,
        },
    )
    listing = run("approval", "list").output
    assert approval.approval_id in listing and "confidence 0.41 < threshold 0.8" in listing
    denied = run(
        "approval",
        "deny",
        approval.approval_id[:14],  # a prefix, as for any id
        "--reason",
        "not before the release",
        "--as",
        "maria",
    )
    assert denied.exit_code == 0 and "denied by maria" in denied.output
    again = run("approval", "approve", approval.approval_id)
    assert again.exit_code == 2 and "already answered" in again.stderr
    with store.unit_of_work() as uow:
        answered = uow.approvals.get(approval.approval_id)
    assert (answered.answer, answered.answered_by, answered.reason) == (
        "denied",
        "maria",
        "not before the release",
    )
    assert answered.answered_at is not None
    assert run("approval", "list").output.strip() == "No pending approvals."
    everything = run("approval", "list", "--all").output
    assert approval.approval_id in everything
    assert "denied by maria: not before the release" in everything
    unknown = run("approval", "approve", "7ZZZZZZZ")
    assert unknown.exit_code == 2
    assert "no approval starts with 7ZZZZZZZ: list them with `agents approval list --all`" in (
        unknown.stderr
    )
    assert run("approval", "approve", "not-an-id").exit_code == 2
    store.close()


def test_an_approval_names_the_command_that_continues_its_plan(run: Run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The answer is only recorded: the plan stays where it waited until a runner continues
    it, so `approve` says which command does (`deny` prints its own choices)."""
    store, approval = _stored_approval(
        run, tmp_path, kind="phase_gate", question="Go on to Execute?"
    )
    store.close()

    approved = run("approval", "approve", approval.approval_id[:14])

    assert approved.exit_code == 0, approved.output
    assert f"next: continue the plan with `agents plan run {approval.plan_id}`" in approved.output


def test_approving_the_apply_gate_says_the_next_run_lands_it(run: Run, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The run after an approved Apply gate lands the plan on the real resources: the line
    says so, where it said "continue the plan" as for any gate."""
    store, approval = _stored_approval(
        run, tmp_path, kind="apply_gate", question="Execute complete. Apply the changes?"
    )
    store.close()
    approved = run("approval", "approve", approval.approval_id)
    assert approved.exit_code == 0, approved.output
    assert approved.output.splitlines()[-1] == (
        f"next: land it on the real resources with `agents plan run {approval.plan_id}`"
    )
