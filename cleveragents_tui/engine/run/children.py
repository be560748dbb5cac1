"""Child plans: spawned by a decision, run to their Apply gate (one parallel spawn's children
concurrently), landed by their parent's Apply (docs/user-guide.md, "Child plans")."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from cleveragents_tui.actors.base import Proposal
from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.dependency import DecisionDependency
from cleveragents_tui.domain.enums import DependencyType, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.in_flight import running_children
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.run.approvals import pending_approvals
from cleveragents_tui.engine.run.errors import WaitForApproval
from cleveragents_tui.engine.run.plans import create_child
from cleveragents_tui.engine.run.run_options import RunOptions
from cleveragents_tui.engine.run.with_children import CHILD_STOPPED
from cleveragents_tui.store.store import Store

if TYPE_CHECKING:
    from cleveragents_tui.engine.run.runner import PlanRunner

_THREADS = "child-plan"  # the name every child plan's thread starts with


def spawn(runner: PlanRunner, decision: Decision, proposal: Proposal) -> None:
    """Create the child plans ``proposal`` spawns, each depending on ``decision``."""
    parent = runner.plan()
    for name in proposal.spawn:
        child_action = runner.action.subaction(name)
        child = create_child(
            runner.store, runner.registry, parent, child_action, decision.decision_id
        )
        with runner.store.unit_of_work(write=True) as uow:
            uow.plan_actions.save(child.plan_id, child_action.model_dump(mode="json"))
            uow.decisions.add_dependency(
                DecisionDependency(
                    upstream_decision_id=decision.decision_id,
                    downstream_ref=child.plan_id,
                    dependency_type=DependencyType.PLAN,
                )
            )
            uow.events.append(
                "child_spawned", {"child": child.plan_id, "action": name}, plan_id=runner.plan_id
            )
            uow.commit()
        OPEN_GRAPHS.spawned(decision.decision_id, child.plan_id)


def open_children(runner: PlanRunner) -> list[Plan]:
    with runner.store.unit_of_work() as uow:
        return [c for c in uow.plans.children(runner.plan_id) if not c.state.is_terminal]


def run_children(runner: PlanRunner) -> None:
    """Run child plans to their Apply gate; children of one parallel spawn run concurrently."""
    waiting = [c for c in open_children(runner) if c.state is not PlanState.COMPLETED]
    if not waiting:
        return

    def run_child(child: Plan) -> Plan:
        options = RunOptions(
            runner.options.registry,
            runner.options.sandbox_base,
            runner.options.reasoner_factory,
            runner.options.user,
            on_start=runner.options.on_start,
        )
        return type(runner)(runner.store, child.plan_id, options).run()

    pool = ThreadPoolExecutor(max_workers=max(1, len(waiting)), thread_name_prefix=_THREADS)
    try:
        with running_children(runner.plan_id, {c.plan_id: c.action for c in waiting}):
            results = list(pool.map(run_child, waiting))
    finally:
        # all done, or stopped at once (a second Ctrl+C, cli/interrupt.py): not waiting for
        # the children's steps under way, which a crash-safe step lets go
        pool.shutdown(wait=False, cancel_futures=True)
    if runner.plan().state is not PlanState.RUNNING:
        return  # paused or cancelled meanwhile, its children with it: nothing to ask
    stuck = [p for p in results if p.state is not PlanState.COMPLETED]
    if not stuck:
        return
    asked = _question_of(runner, stuck)
    if asked is not None:
        raise WaitForApproval(asked)  # the plan waits on it: answering it is enough
    child = stuck[0]
    approval = runner.gates.ask(  # running the child on answers it (with_children.py)
        ApprovalKind.SPAWN,
        f"{CHILD_STOPPED}{child.plan_id}",
        f"Child plan {child.plan_id} ({child.action}) stopped in {child.state.value}; approve"
        f" to run it on with this plan, or run it on alone: agents plan run {child.plan_id}",
    )
    raise WaitForApproval(approval)


def _question_of(runner: PlanRunner, stuck: list[Plan]) -> Approval | None:
    """The first question the children wait on, when every stopped child waits on one (its
    own, or its child's): the parent waits on it too, with no question of its own — a
    second approval for every gate of a child was asked before. None when a child stopped
    otherwise (paused, errored): the parent then asks to go on once it is resumed."""
    if any(child.state is not PlanState.AWAITING_APPROVAL for child in stuck):
        return None
    asked = pending_approvals(runner.store, stuck[0].plan_id, family=True)
    return asked[0] if asked else None


def run_from(store: Store, plan_id: str) -> str:
    """The plan whose run goes on with this one: its parent's (and so on up), while the
    parent has not finished Execute — its run runs its children — else the plan itself."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        while plan.parent_plan_id is not None:
            parent = uow.plans.get(plan.parent_plan_id)
            if parent.state.is_terminal or parent.state is PlanState.COMPLETED:
                break
            plan = parent
    return plan.plan_id


def landing_parent(store: Store, plan: Plan) -> str | None:
    """A child plan that finished its run waits for its parent's run to go on (which lands
    it with the parent's Apply): the plan to run then, or None (not such a child)."""
    if plan.parent_plan_id is None or plan.state is not PlanState.COMPLETED:
        return None
    goes_on = run_from(store, plan.plan_id)
    return None if goes_on == plan.plan_id else goes_on


def still_running() -> bool:
    """Whether a child plan's run is still under way in this process (its parent's run
    stopped at once, and did not wait for it)."""
    return any(t.name.startswith(_THREADS) and t.is_alive() for t in threading.enumerate())


def landed_by_parent(runner: PlanRunner) -> bool:
    """A child plan is landed by its parent's Apply, unless the parent has already been
    applied (a plan appended to an applied plan): then it goes to its own Apply gate."""
    parent_id = runner.plan().parent_plan_id
    if parent_id is None:
        return False
    with runner.store.unit_of_work() as uow:
        return uow.plans.get(parent_id).state is not PlanState.APPLIED


def landing_order(runner: PlanRunner) -> list[tuple[PlanRunner, bool]]:
    """The open child plans Apply lands before this one, and theirs (an appended plan's
    spawns) before them, each with whether it lands sandboxes of its own: an appended plan
    works in this plan's sandboxes, which land once, with this plan's."""
    order: list[tuple[PlanRunner, bool]] = []
    for child in open_children(runner):
        child_runner = type(runner)(runner.store, child.plan_id, runner.options)
        order.extend(landing_order(child_runner))
        order.append((child_runner, child_runner.sandboxes.host_plan_id == child.plan_id))
    return order
