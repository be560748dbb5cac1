"""Validation rules of the plan, resource, checkpoint, dependency and correction models."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.dependency import DecisionDependency
from cleveragents_tui.domain.enums import PlanState, SandboxStrategyName
from cleveragents_tui.domain.errors import InvalidIdError
from cleveragents_tui.domain.ids import is_ulid_prefix, new_ulid, parse_ulid
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import DEFAULT_CHECKPOINT_BUDGET, Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.tool import ToolInvocation


def test_plan_defaults() -> None:
    plan = Plan(action="local/add-greeting")
    assert (plan.phase.value, plan.state.value, plan.attempt, plan.version) == (
        "strategize",
        "created",
        1,
        0,
    )


def test_a_child_plan_names_both_parent_and_spawning_decision() -> None:
    with pytest.raises(ValidationError, match="both parent_plan_id and spawning_decision_id"):
        Plan(action="a/b", parent_plan_id=new_ulid())
    with pytest.raises(ValidationError, match="both parent_plan_id and spawning_decision_id"):
        Plan(action="a/b", spawning_decision_id=new_ulid())
    child = Plan(action="a/b", parent_plan_id=new_ulid(), spawning_decision_id=new_ulid())
    assert child.parent_plan_id is not None


def test_a_plan_cannot_be_its_own_parent() -> None:
    own = new_ulid()
    with pytest.raises(ValidationError, match="own parent"):
        Plan(plan_id=own, action="a/b", parent_plan_id=own, spawning_decision_id=new_ulid())


def test_only_an_apply_phase_plan_is_applied() -> None:
    with pytest.raises(ValidationError, match="apply phase"):
        Plan(action="a/b", phase="execute", state="applied")
    assert Plan(action="a/b", phase="apply", state="applied").state.is_terminal


def test_attempt_starts_at_one() -> None:
    with pytest.raises(ValidationError, match="attempt"):
        Plan(action="a/b", attempt=0)


def test_updated_at_is_not_before_created_at() -> None:
    now = utc_now()
    with pytest.raises(ValidationError, match="updated_at"):
        Plan(action="a/b", created_at=now, updated_at=now - timedelta(seconds=1))


def test_plan_states_cover_the_lifecycle() -> None:
    assert {s.value for s in PlanState} >= {
        "created",
        "running",
        "paused",
        "awaiting_approval",
        "completed",
        "constrained",
        "errored",
        "applied",
        "cancelled",
    }


def test_resource_ids_are_namespaced_and_budget_defaults_to_50() -> None:
    r = Resource(
        resource_id="local/hello-cli",
        kind="git",
        location="/src/hello",
        sandbox_strategy="git_worktree",
    )
    assert r.checkpoint_max_per_plan == DEFAULT_CHECKPOINT_BUDGET == 50
    assert r.rollbackable
    with pytest.raises(ValidationError, match="namespace/name"):
        Resource(resource_id="hello", kind="git", location="/x", sandbox_strategy="git_worktree")
    none = Resource(
        resource_id="local/api", kind="external", location="https://x", sandbox_strategy="none"
    )
    assert not none.rollbackable


def test_sandbox_strategies_are_the_five_of_the_specification() -> None:
    assert {s.value for s in SandboxStrategyName} == {
        "git_worktree",
        "filesystem_copy",
        "overlay",
        "transaction_rollback",
        "none",
    }


def _checkpoint(**overrides: Any) -> CheckpointMetadata:
    fields: dict[str, Any] = {
        "plan_id": new_ulid(),
        "decision_id": new_ulid(),
        "resource_id": "local/repo",
        "checkpoint_type": "decision_point",
        "strategy": "git_worktree",
        "ref": "a" * 40,
    }
    fields.update(overrides)
    return CheckpointMetadata(**fields)


def test_decision_checkpoints_need_their_decision_and_pre_write_ones_have_none() -> None:
    assert _checkpoint().decision_id
    with pytest.raises(ValidationError, match="needs its decision_id"):
        _checkpoint(decision_id=None)
    with pytest.raises(ValidationError, match="belongs to no decision"):
        _checkpoint(checkpoint_type="pre_write")
    assert _checkpoint(checkpoint_type="pre_write", decision_id=None).decision_id is None


def test_non_rollbackable_checkpoints_are_exactly_those_of_strategy_none() -> None:
    with pytest.raises(ValidationError, match="strategy none"):
        _checkpoint(strategy="none")
    with pytest.raises(ValidationError, match="strategy none"):
        _checkpoint(checkpoint_type="non_rollbackable")
    assert _checkpoint(checkpoint_type="non_rollbackable", strategy="none", ref="marker")


def test_a_decision_cannot_depend_on_itself() -> None:
    own = new_ulid()
    with pytest.raises(ValidationError, match="itself"):
        DecisionDependency(upstream_decision_id=own, downstream_ref=own, dependency_type="decision")


def test_a_finished_correction_has_finished_at_and_a_running_one_does_not() -> None:
    base: dict[str, Any] = {
        "plan_id": new_ulid(),
        "target_decision_id": new_ulid(),
        "mode": "revert",
        "attempt": 2,
    }
    assert CorrectionAttempt(**base).status.value == "running"
    with pytest.raises(ValidationError, match="finished_at"):
        CorrectionAttempt(**base, status="succeeded")
    with pytest.raises(ValidationError, match="finished_at"):
        CorrectionAttempt(**base, finished_at=utc_now())
    with pytest.raises(ValidationError, match="mode"):
        CorrectionAttempt(**{**base, "mode": "rewrite"})


def test_tool_invocations_record_side_effects_and_irreversibility() -> None:
    call = ToolInvocation(
        plan_id=new_ulid(),
        decision_id=new_ulid(),
        tool="local/send-email",
        side_effects=("external:email",),
        irreversible=True,
    )
    assert call.irreversible
    with pytest.raises(ValidationError, match="tool"):
        ToolInvocation(plan_id=new_ulid(), decision_id=new_ulid(), tool=" ")


def test_parse_ulid_names_what_was_wrong() -> None:
    with pytest.raises(InvalidIdError, match="plan 'xyz' is not a valid ULID"):
        parse_ulid("xyz", "plan")
    assert is_ulid_prefix("01HX") and not is_ulid_prefix("01HI") and not is_ulid_prefix("")


def test_new_ulid_is_python_ulids_encoding_of_now() -> None:
    """new_ulid encodes by hand what python-ulid's ``str(ULID())`` gives: the same text for
    the same 128 bits, the current millisecond first, fresh randomness after."""
    from datetime import UTC, datetime, timedelta

    from ulid import ULID

    before = datetime.now(UTC) - timedelta(milliseconds=1)
    made = [new_ulid() for _ in range(200)]
    after = datetime.now(UTC) + timedelta(milliseconds=1)
    assert len(set(made)) == len(made)
    for text in made:
        parsed = ULID.from_str(text)
        assert str(parsed) == text == parse_ulid(text)
        assert before <= parsed.datetime <= after
