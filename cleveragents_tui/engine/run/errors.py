"""How a run stops short: the signals the runner and its helpers raise, and the reason an
errored run recorded (``plan show`` prints it; ``agents plan run`` retries)."""

from __future__ import annotations

from cleveragents_tui.domain.approval import Approval
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork


class WaitForApproval(Exception):
    """The step needs a person; the pending approval is stored."""

    def __init__(self, approval: Approval) -> None:
        self.approval = approval
        super().__init__(approval.question)


class ReviseStrategy(Exception):
    """The execution actor found the strategy's constraints too tight (phase reversion)."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(reason)


class PlanStateError(UserError):
    """The plan is not in a state that allows what was asked."""


class SandboxUnavailableError(UserError):
    """A resource's sandbox could not be made (a repository without commits, a sandbox
    folder that cannot be written): the plan ended ``errored`` with ``reason`` recorded."""

    def __init__(self, plan_id: str, reason: str) -> None:
        self.plan_id = plan_id
        self.reason = reason
        super().__init__(
            f"plan {plan_id} errored: {reason}", f"then run it again: agents plan run {plan_id}"
        )

    @classmethod
    def of(cls, plan_id: str, resource_id: str, cause: Exception) -> SandboxUnavailableError:
        if isinstance(cause, UserError) and resource_id in str(cause):
            return cls(plan_id, str(cause))  # it names the resource, the problem and the fix
        return cls(plan_id, f"the sandbox of {resource_id} could not be made: {cause}")


class ReasonerFailedError(UserError):
    """The plan's reasoner gave no decision (its model call failed, or its reply was
    refused): the plan ended ``errored`` with ``reason`` recorded, not left ``running``."""

    def __init__(self, plan_id: str, reason: str) -> None:
        self.plan_id = plan_id
        self.reason = reason
        super().__init__(
            f"plan {plan_id} errored: {reason}", f"then run it again: agents plan run {plan_id}"
        )


def record_errored(store: Store, plan_id: str, reason: str) -> None:
    """End the run ``errored`` with its reason (a ``plan_errored`` event naming the plan
    version it applies to, which `plan show` prints), not ``running`` as if a process
    still advanced it: `agents plan run` retries once the cause is fixed."""
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(plan_id)
        if plan.state.is_terminal:
            return
        saved = uow.plans.save(
            plan.model_copy(update={"state": PlanState.ERRORED, "updated_at": utc_now()})
        )
        uow.events.append(
            "plan_state",
            {"phase": saved.phase.value, "state": saved.state.value},
            plan_id=plan_id,
        )
        uow.events.append(
            "plan_errored", {"reason": reason, "version": saved.version}, plan_id=plan_id
        )
        uow.commit()


def run_failure(uow: UnitOfWork, plan: Plan) -> str | None:
    """Why ``plan`` is errored when its run failed (a sandbox that could not be made) and
    nothing has changed it since: the reason its last ``plan_errored`` event recorded for
    this plan version. None otherwise (an errored correction has its own report)."""
    if plan.state is not PlanState.ERRORED:
        return None
    failures = uow.events.payloads(plan.plan_id, "plan_errored")
    if failures and failures[-1].get("version") == plan.version:
        return str(failures[-1].get("reason"))
    return None
