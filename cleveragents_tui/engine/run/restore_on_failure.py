"""Restore from checkpoint before a failed call is retried (the ``approve_plan`` flag).

A call that writes and fails may leave half its work in the sandbox (a command that wrote
some files, then exited 1). Before engine/run/failures.py retries it, the resource it names goes
back to the ``pre_write`` checkpoint taken just before its last run, so the retry starts
from the state the first run started from — when the profile's ``approve_plan`` threshold
lets the system do it alone. Below the threshold an ``escalation`` approval asks: approve
restores then retries; deny retries without restoring (after the denial's pause, on
``agents plan run``).

Nothing to restore — a call that does not write, names no resource, whose resource keeps
no checkpoints, whose ``pre_write`` checkpoint the budget pruned, or that failed without
changing anything (an edit whose old text was not found) — asks nothing. A
database in a live transaction (``transaction_rollback``) is left as it is: rolling it back
to a savepoint would destroy the savepoints of the decisions recorded since.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from cleveragents_tui.actors.base import ToolCallRequest
from cleveragents_tui.automation.escalation import EscalationContext
from cleveragents_tui.domain.approval import ApprovalAnswer, ApprovalKind
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CheckpointType, DecisionType, SandboxStrategyName
from cleveragents_tui.domain.profile import AutomationFlag
from cleveragents_tui.engine.core.rollback import rollback_to

if TYPE_CHECKING:
    from cleveragents_tui.engine.run.runner import PlanRunner

RESTORED_EVENT = "restored_before_retry"


def before_retry(
    runner: PlanRunner,
    recovery: Decision,
    call: ToolCallRequest,
    replaced: bool = False,
    unchanged: Collection[str] = (),
) -> None:
    """Called right before ``call`` is run again under ``recovery`` (a retry decision), or
    (``replaced``) the calls its actor gave in its place. Raises WaitForApproval when a
    person must decide whether to restore. Nothing is restored (nor asked) for a resource
    in ``unchanged``: no call wrote it since its latest ``pre_write`` checkpoint, as the
    tools reported in this process."""
    from cleveragents_tui.engine.run.errors import WaitForApproval

    checkpoint = _restore_point(runner, call)
    if checkpoint is None or checkpoint.resource_id in unchanged:
        return
    key = f"restore:{recovery.decision_id}"
    answers = runner.gates.answers(ApprovalKind.ESCALATION, key)
    if answers:
        latest = answers[-1]
        if latest.answer is None:
            raise WaitForApproval(latest)
        if latest.answer is ApprovalAnswer.APPROVED:
            _restore(runner, recovery, checkpoint)
        return  # denied: retry as it is
    spec = runner.registry.tool(call.tool).spec
    then = "make the calls given in its place" if replaced else "retry"
    context = EscalationContext(
        plan_id=runner.plan_id,
        question=(
            f"{call.tool} failed and may have left part of its work in "
            f"{checkpoint.resource_id}. Approve to restore it from the checkpoint taken before "
            f"the call, then {then}; deny to {then} without restoring."
        ),
        decision_type=DecisionType.ERROR_RECOVERY,
        decision_id=recovery.decision_id,
        project=runner.plan().project,
        tools=(spec,),
    )
    verdict = runner.gates.escalate(AutomationFlag.APPROVE_PLAN, context, key)
    if not verdict.proceed:
        assert verdict.approval is not None
        raise WaitForApproval(verdict.approval)
    _restore(runner, recovery, checkpoint)


def _restore_point(runner: PlanRunner, call: ToolCallRequest) -> CheckpointMetadata | None:
    """The ``pre_write`` checkpoint taken right before the call's last run: the resource's
    latest one, if it is still live. Never an older one in its place: when the budget pruned
    it (the retry decision's own checkpoint can push it out), an older ``pre_write`` holds a
    state from before other decisions' work, and restoring it would erase that work."""
    resource = call.arguments.get("resource")
    spec = runner.registry.get(call.tool)
    if not isinstance(resource, str) or spec is None or not spec.writes:
        return None
    with runner.store.unit_of_work() as uow:
        latest = uow.checkpoints.latest_of_type(runner.plan_id, resource, CheckpointType.PRE_WRITE)
    if latest is None:
        return None
    if latest.pruned_at is not None or latest.strategy is SandboxStrategyName.TRANSACTION_ROLLBACK:
        return None
    return latest


def _restore(runner: PlanRunner, recovery: Decision, checkpoint: CheckpointMetadata) -> None:
    report = rollback_to(
        runner.sandboxes,
        f"restore before retry {recovery.decision_id}",
        {checkpoint.resource_id: checkpoint},
        [],
    )
    with runner.store.unit_of_work(write=True) as uow:
        uow.events.append(
            RESTORED_EVENT,
            {
                "decision": recovery.decision_id,
                "resource": checkpoint.resource_id,
                "checkpoint": checkpoint.checkpoint_id,
                "report": report.model_dump(mode="json"),
            },
            plan_id=runner.plan_id,
        )
        uow.commit()
