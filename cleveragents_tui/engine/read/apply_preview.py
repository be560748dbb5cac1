"""``agents plan apply PLAN --dry-run``: what Apply would land on each real resource.

It walks what Apply walks (engine/run/apply.py): the open child plans first, depth first,
then the plan; each plan's own sandboxes (an appended plan lands with its host's). Each
sandbox says what it would land through :class:`PreviewsApply`, which writes nothing, so a
dry run answers no approval, stores no row or event, and leaves every sandbox and real
resource as it was. A resource that cannot say gets one line saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.apply_journal import ApplyStepState
from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.documents import ApplyVerdict
from cleveragents_tui.domain.enums import Phase, PlanState, SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.wording import as_option
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_root
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.errors import PlanStateError
from cleveragents_tui.engine.run.lifecycle import refuse_finished
from cleveragents_tui.sandbox.base import Change, ChecksApply, PreviewsApply
from cleveragents_tui.store.store import Store

if TYPE_CHECKING:
    from cleveragents_tui.store.unit_of_work import UnitOfWork


@dataclass(frozen=True, slots=True)
class ResourcePreview:
    """One resource: the changes Apply would land (None: not listed, ``note`` says why)."""

    resource_id: str
    strategy: str
    changes: tuple[Change, ...] | None
    note: str | None = None
    refusal: str | None = None  # why Apply would refuse it now (exit 3): "problem: fix"


@dataclass(frozen=True, slots=True)
class PlanPreview:
    """One plan Apply lands: its own sandboxes, or none when it works in ``sandbox_host``'s."""

    plan_id: str
    action: str
    sandbox_host: str | None
    resources: tuple[ResourcePreview, ...]


@dataclass(frozen=True, slots=True)
class NotNow:
    """Why ``plan apply`` would not land the plan at once, and what to do first (a command,
    or what to wait for), or None when it runs at once (``note`` then only explains)."""

    note: str
    first: str | None


@dataclass(frozen=True, slots=True)
class ApplyPreview:
    plan: Plan  # as read for the preview (its heading is printed from it)
    at_apply_gate: bool
    not_now: NotNow | None  # why `plan apply` would not land it now, else None
    plans: tuple[PlanPreview, ...]  # in the order Apply lands them
    reverts: bool = False  # a person approved reverting its refused Apply: no landing
    gate_by: str | None = None  # who `plan apply` answers the open (or denied) Apply gate as
    outside: tuple[str, ...] = ()  # files changed in its sandboxes outside the plan, unasked
    as_name: str | None = None  # the `--as NAME` given: the commands it suggests repeat it

    @property
    def note(self) -> str | None:
        return None if self.not_now is None else self.not_now.note

    @property
    def first(self) -> str | None:
        """What to do before `plan apply` can run (it refuses with exit 2 until then): a
        command, or what to wait for."""
        return None if self.not_now is None else self.not_now.first

    @property
    def command(self) -> str:
        """The `plan apply` to run, with the ``--as NAME`` the dry run was given."""
        return f"agents plan apply {self.plan.plan_id}{as_option(self.as_name)}"

    @property
    def refused(self) -> bool:
        """Whether Apply would be refused now (exit 3): a real resource changed under it."""
        return any(r.refusal is not None for shown in self.plans for r in shown.resources)

    @property
    def approved_by(self) -> str | None:
        """Who would approve the Apply gate now (``plan apply --as NAME``): None when it
        answers none (answered already, or it refuses before answering)."""
        return self.gate_by if self.verdict in ("lands", "refused", "asks") else None

    @property
    def verdict(self) -> ApplyVerdict:
        """What `plan apply` would do now: ``reverts`` (to Strategize, landing nothing),
        ``waits`` (refused, exit 2, until :attr:`first` is done), ``asks`` (it stops to ask
        whether to keep files changed in a sandbox outside the plan, exit 0, nothing landed),
        ``refused`` (Apply runs and refuses, exit 3) or ``lands``; in the order `plan apply`
        meets them."""
        if self.first is not None:
            return "waits"
        if self.reverts:
            return "reverts"
        if self.outside:
            return "asks"
        return "refused" if self.refused else "lands"


def preview_apply(
    store: Store,
    plan_ref: str,
    sandbox_base: Path | None = None,
    *,
    by: str | None = None,
    as_name: str | None = None,
) -> ApplyPreview:
    """What ``agents plan apply`` (approving as ``by``) would land now. Refused
    (PlanStateError) for a plan that is applied or cancelled, or still in Strategize (it
    has no sandboxes yet). ``as_name``: the ``--as NAME`` given, which the commands it
    suggests (to apply, to approve a question first) repeat."""
    from cleveragents_tui.engine.run.constrained_apply import revert_approved
    from cleveragents_tui.engine.run.denial import latest_denial

    with store.unit_of_work() as uow:
        plan_id = uow.plans.resolve(plan_ref)
    refuse_finished(store, plan_id)
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        pending = uow.approvals.pending(plan_id)
        order = _landing_order(uow, plan_id)
        resources = {r.resource_id: r for r in uow.resources.all()}
    if plan.phase is Phase.STRATEGIZE:
        raise PlanStateError(
            f"plan {plan_id} is {plan.phase.value} · {plan.state.value}: it has no sandboxes "
            "before Execute, so nothing to apply yet",
            f"answer what it waits for (agents approval list), then: agents plan run {plan_id}"
            if pending
            else f"run it until it waits at the Apply gate: agents plan run {plan_id}",
        )
    plans = tuple(
        _plan_preview(store, child, host, resources, sandbox_base) for child, host in order
    )
    denied = latest_denial(store, plan_id)
    gate_denied = denied is not None and denied.kind is ApprovalKind.APPLY_GATE
    # A plan paused at its denied Apply gate: `plan apply` approves it after all, and the
    # plan waits at the gate again (engine/run/denial.py) before Apply runs.
    seen = plan.model_copy(update={"state": PlanState.AWAITING_APPROVAL}) if gate_denied else plan
    at_gate = _at_gate(store, seen)
    not_now: NotNow | None = None
    if run_lease.is_held(sandbox_base, plan_id, store):  # `plan apply` asks this first
        not_now = NotNow(
            "another runner is advancing the plan now (a `plan run`, `plan apply` or a "
            "correction): `plan apply` refuses while it runs",
            "wait for it to finish",
        )
    elif gate_denied:
        not_now = NotNow(
            "its Apply gate was denied, which paused it: `plan apply` approves the gate "
            "after all and lands it",
            None,
        )
    else:
        questions = [a for a in pending if a.kind is not ApprovalKind.APPLY_GATE]
        not_now = _why_not_now(plan, at_gate, questions, as_name)
    reverts = revert_approved(store, plan)
    if reverts and not_now is not None and not_now.first is None:
        not_now = NotNow(
            "its Apply was refused and a person approved reverting it: `plan apply` reverts "
            "the plan to Strategize to re-plan, landing nothing",
            None,
        )
    gate_open = gate_denied or any(a.kind is ApprovalKind.APPLY_GATE for a in pending)
    return ApplyPreview(
        plan=plan,
        at_apply_gate=at_gate,
        not_now=not_now,
        plans=plans,
        reverts=reverts,
        gate_by=by if gate_open else None,
        outside=_outside_unasked(store, plan, sandbox_base),
        as_name=as_name,
    )


def _outside_unasked(store: Store, plan: Plan, sandbox_base: Path | None) -> tuple[str, ...]:
    """Files changed in the plan's sandboxes outside it since it stopped, which Apply stops
    to ask about (PlanRunner.reconcile) — unless that very set was asked about in this
    attempt: an answer keeps or discards them, an open question is a question before the
    gate. Read only (the reconciler's scan, as a correction's preview makes it)."""
    from cleveragents_tui.engine.core.reconcile import Reconciler, fingerprint

    with store.unit_of_work() as uow:
        action = Action.model_validate(uow.plan_actions.get(plan.plan_id))
        everything = uow.approvals.every(plan.plan_id)
    sandboxes = PlanSandboxes(store, plan.plan_id, sandbox_base)
    changes = Reconciler(sandboxes, action.resources, plan.attempt).outside_changes()
    if not changes:
        return ()
    key = f"reconcile:{fingerprint(changes)}@{plan.attempt}"  # as PlanRunner.reconcile asks
    if any(a.kind is ApprovalKind.RECONCILE and a.details.get("key") == key for a in everything):
        return ()
    return tuple(change.summary() for change in changes)


def _at_gate(store: Store, plan: Plan) -> bool:
    """As run/apply.py decides it: Execute completed, or its Apply gate asked in this
    attempt (answered or not) while it waits or runs."""
    if plan.phase is not Phase.EXECUTE:
        return False
    if plan.state is PlanState.COMPLETED:
        return True
    if plan.state not in (PlanState.AWAITING_APPROVAL, PlanState.RUNNING):
        return False
    with store.unit_of_work() as uow:
        everything = uow.approvals.every(plan.plan_id)
    key = f"apply@{plan.attempt}"  # PlanGates.scoped("apply"), as run/apply.py asks it
    return any(
        a.kind is ApprovalKind.APPLY_GATE and a.details.get("key") == key for a in everything
    )


def _landing_order(uow: UnitOfWork, plan_id: str) -> list[tuple[Plan, str]]:
    """(plan, the plan whose sandboxes it works in), as Apply lands them (run/children.py):
    each open child's children, the child, and the plan last."""
    out: list[tuple[Plan, str]] = []
    for child in uow.plans.children(plan_id):
        if not child.state.is_terminal:
            out.extend(_landing_order(uow, child.plan_id))
    plan = uow.plans.get(plan_id)
    out.append((plan, uow.plan_actions.sandbox_plan(plan_id)))
    return out


def _why_not_now(
    plan: Plan, at_gate: bool, questions: list[Approval], as_name: str | None
) -> NotNow | None:
    """As `plan apply` decides (engine/run/lifecycle.py ``apply_plan``, run/apply.py);
    a question is answered as ``as_name`` (`approval approve --as`, as `plan apply --as`)."""
    plan_id = plan.plan_id
    if plan.state is PlanState.PAUSED:
        return NotNow(
            f"the plan is paused: resume it first (agents plan resume {plan_id})",
            f"agents plan resume {plan_id}",
        )
    if questions and plan.phase is Phase.EXECUTE:
        return NotNow(
            f"the plan waits for an answer before its Apply gate: {questions[0].question}",
            f"agents approval approve {questions[0].approval_id}{as_option(as_name)}",
        )
    if plan.phase is Phase.APPLY and plan.state in _RETRIED:
        return NotNow(
            f"its Apply was stopped ({plan.state.value}): applying again lands what is "
            "listed, skipping what landed already",
            None,
        )
    if plan.phase is Phase.APPLY:  # stopped for a question while Apply was retried
        return NotNow(
            f"its Apply stopped ({plan.state.value}): `plan apply` refuses until the plan runs on",
            f"agents plan run {plan_id}",
        )
    if not at_gate:
        return NotNow(
            f"Execute has not finished ({plan.state.value}): these are its changes so far; "
            "`plan apply` refuses until the plan waits at its Apply gate",
            f"agents plan run {plan_id}",
        )
    return None


_RETRIED = (PlanState.CONSTRAINED, PlanState.ERRORED, PlanState.RUNNING)  # run/apply.py


def _plan_preview(
    store: Store,
    plan: Plan,
    host: str,
    resources: dict[str, Resource],
    sandbox_base: Path | None,
) -> PlanPreview:
    if host != plan.plan_id:  # an appended plan: its changes are in its host's sandboxes
        return PlanPreview(plan.plan_id, plan.action, host, ())
    with store.unit_of_work() as uow:
        action = Action.model_validate(uow.plan_actions.get(plan.plan_id))
        landed = {
            step.resource_id
            for step in uow.apply_journal.for_apply(plan.plan_id, plan.attempt)
            if step.state is ApplyStepState.LANDED
        }
    sandboxes = PlanSandboxes(store, plan.plan_id, sandbox_base, host_plan_id=host)
    previews = []
    for resource_id in action.resources:
        resource = resources[resource_id]
        if resource_id in landed:
            previews.append(_noted(resource, "landed already, by an Apply that was stopped"))
        else:
            previews.append(_resource_preview(sandboxes, resource))
    return PlanPreview(plan.plan_id, plan.action, None, tuple(previews))


def _noted(resource: Resource, note: str) -> ResourcePreview:
    return ResourcePreview(resource.resource_id, resource.sandbox_strategy.value, None, note)


def _resource_preview(sandboxes: PlanSandboxes, resource: Resource) -> ResourcePreview:
    strategy = resource.sandbox_strategy
    if strategy is SandboxStrategyName.NONE:
        return _noted(
            resource,
            "no sandbox: its changes went straight to the real resource as the plan ran; "
            "Apply lands nothing more",
        )
    root = sandbox_root(sandboxes.base_dir, sandboxes.host_plan_id, resource.resource_id)
    if strategy is SandboxStrategyName.TRANSACTION_ROLLBACK and root.exists():
        from cleveragents_tui.sandbox.database import is_savepoint_sandbox

        if is_savepoint_sandbox(root):
            return _noted(
                resource,
                "not listed: its sandbox is one open transaction, which another process "
                "reads only by taking it over (replaying its statement log)",
            )
    try:
        sandbox = sandboxes.get(resource.resource_id)
    except UserError as exc:  # gone, or not the plan's: Apply opens it first and refuses too
        why = " ".join(str(exc).split())
        return ResourcePreview(
            resource.resource_id, strategy.value, None, f"not listed: {why}", refusal=why
        )
    except OSError as exc:
        return _noted(resource, "not listed: " + " ".join(str(exc).split()))
    try:
        if not isinstance(sandbox, PreviewsApply):
            return _noted(
                resource,
                f"not listed: a {strategy.value} sandbox cannot say without changing itself",
            )
        changes = tuple(sandbox.pending_changes())
        refused = sandbox.apply_refusal() if isinstance(sandbox, ChecksApply) else None
    except (UserError, OSError) as exc:
        return _noted(resource, "not listed: " + " ".join(str(exc).split()))
    refusal = None if refused is None else " ".join(str(refused).split())  # and its fix
    return ResourcePreview(resource.resource_id, strategy.value, changes, refusal=refusal)
