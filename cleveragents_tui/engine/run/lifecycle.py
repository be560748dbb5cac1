"""Pause, resume (also with a choice or guidance after a denial), cancel and apply: the control
a person has over a running plan."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path

from cleveragents_tui import failpoints
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import ApprovalAnswer
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, Phase, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.approvals import record_answer
from cleveragents_tui.engine.run.denial import (
    alternatives_of,
    approve_denied_apply_gate,
    latest_denial,
    pending_point,
)
from cleveragents_tui.engine.run.errors import PlanStateError
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions
from cleveragents_tui.engine.run.with_children import (
    answer_parents_wait,
    cancel_children,
    pause_children,
    resume_children,
)
from cleveragents_tui.store.correction_queries import lapse_pending_approvals
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork


def _change(
    store: Store,
    plan_ref: str,
    allowed: tuple[PlanState, ...],
    state: PlanState,
    what: str,
    *,
    by: str | None = None,
    lapse_approvals: bool = False,
    refuse: Callable[[Plan], None] | None = None,
    children: Callable[[UnitOfWork, Plan, str | None], object] | None = None,
) -> Plan:
    """``by``: who made the change (its event's actor); ``refuse``: raises for a plan in an
    allowed state that still cannot change (read in the same transaction as the change);
    ``children``: what the change does to the plan's child plans, in that transaction
    (engine/run/with_children.py)."""
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
        if refuse is not None:
            refuse(plan)
        if plan.state not in allowed:
            raise UserError(
                f"plan {plan.plan_id} is {plan.state.value}: it cannot be {what}",
                f"only a plan that is {' or '.join(s.value for s in allowed)} can be {what}",
            )
        saved = uow.plans.save(plan.model_copy(update={"state": state, "updated_at": utc_now()}))
        uow.events.append(
            f"plan_{what}", {"from": plan.state.value}, plan_id=plan.plan_id, actor=by
        )
        if lapse_approvals:
            uow.run(lapse_pending_approvals, plan.plan_id, what, f"the plan was {what}")
        if children is not None:
            children(uow, plan, by)
        uow.commit()
    return saved


def pause_plan(store: Store, plan_ref: str, by: str | None = None) -> Plan:
    """Takes effect between steps: a runner stops before its next decision, and so do the
    runners of its running child plans. An Apply has no decisions to stop before: it is
    refused; so is an applied plan, whose refusal names its appended plan that runs."""
    failpoints.hit("plan.pause")
    try:
        return _change(
            store,
            plan_ref,
            (PlanState.RUNNING, PlanState.CREATED, PlanState.AWAITING_APPROVAL),
            PlanState.PAUSED,
            "paused",
            by=by,
            refuse=_refuse_applying,
            children=pause_children,
        )
    except UserError:
        appended = _running_appended(store, plan_ref)
        if appended is None:
            raise
        raise UserError(
            f"plan {appended.parent_plan_id} is applied: it cannot be paused",
            f"its appended plan runs; pause that: agents plan pause {appended.plan_id}",
        ) from None


def pause_run(store: Store, plan_ref: str, by: str | None = None) -> Plan:
    """Pause what a run of the plan advances: the plan (:func:`pause_plan`), or — for an
    applied plan, which cannot be paused — the plan a correction appended to it, which is
    what runs then. Returns the plan paused; raises the plan's own refusal otherwise."""
    appended = _running_appended(store, plan_ref)
    return pause_plan(store, plan_ref if appended is None else appended.plan_id, by)


def _running_appended(store: Store, plan_ref: str) -> Plan | None:
    """An applied plan's appended plan that runs (or is about to), if any: what a pause of
    the applied plan's run means."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
        if plan.state is not PlanState.APPLIED:
            return None
        appended = [
            c
            for c in uow.plans.children(plan.plan_id)
            if c.state in (PlanState.RUNNING, PlanState.CREATED)
        ]
    return appended[-1] if appended else None


def _refuse_applying(plan: Plan) -> None:
    if plan.phase is Phase.APPLY and plan.state is PlanState.RUNNING:
        raise UserError(
            f"plan {plan.plan_id} is being applied: an Apply cannot be paused",
            f"wait for it to land; one that was stopped is finished by agents plan run "
            f"{plan.plan_id}",
        )


def pause_left_running(store: Store, plan_id: str, *, by: str, why: str) -> bool:
    """Mark a plan a stopped run left ``running`` paused (``by`` whom, ``why``), as nothing
    advances it until someone resumes it; False, and nothing changed, for a plan that was
    never run (a recorded sample), is not running, or is in a running correction. Its
    running child plans, which ran in the same process, are paused with it. The caller
    holds the plan's run lease."""
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(plan_id)
        try:
            uow.plan_actions.get(plan_id)
        except UserError:
            return False  # never run (a recorded sample): its state is a recorded one
        if plan.state is not PlanState.RUNNING or uow.corrections.running(plan_id) is not None:
            return False
        uow.plans.save(plan.model_copy(update={"state": PlanState.PAUSED, "updated_at": utc_now()}))
        uow.events.append(
            "plan_paused", {"from": "running", "reason": why}, plan_id=plan_id, actor=by
        )
        pause_children(uow, plan, by)
        uow.commit()
    return True


def pause_stopped_run(store: Store, plan_ref: str, base_dir: Path | None = None) -> None:
    """After this process's run of the plan stopped at once (a second Ctrl+C): mark it paused
    if the run left it running (under its run lease: not while another process runs it). An
    Apply stays as it is: `agents plan run` finishes it."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
    if plan.phase is Phase.APPLY:
        return
    with (
        contextlib.suppress(run_lease.PlanBusyError),
        run_lease.holding(base_dir, plan.plan_id, "pausing", store),
    ):
        pause_left_running(store, plan.plan_id, by="agents (Ctrl+C)", why="stopped by Ctrl+C")


def cancel_plan(store: Store, plan_ref: str, by: str | None = None) -> Plan:
    """The plan's unanswered questions lapse with it (denied, by ``cancelled``): a cancelled
    plan asks nothing, and its Apply gate can no longer be approved. Its open child plans,
    which only its Apply could land, are cancelled with it."""
    open_states = tuple(s for s in PlanState if not s.is_terminal)
    return _change(
        store,
        plan_ref,
        open_states,
        PlanState.CANCELLED,
        "cancelled",
        by=by,
        lapse_approvals=True,
        children=cancel_children,
    )


def resume_plan(store: Store, plan_ref: str, options: RunOptions | None = None) -> Plan:
    """Continue a paused plan, or one whose approvals were answered, as far as it can go;
    retry an Apply that was refused (constrained) or failed (errored), or a run that failed
    (errored: a correction's replay, say). Refused, with nothing changed, while another
    runner holds the plan."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
    with run_lease.holding(_sandbox_base(options), plan.plan_id, "running", store):
        return _resume(store, plan, options)


def _sandbox_base(options: RunOptions | None) -> Path | None:
    return options.sandbox_base if options else None


def _resume(store: Store, plan: Plan, options: RunOptions | None) -> Plan:
    if plan.phase is Phase.APPLY and plan.state in (
        PlanState.CONSTRAINED,
        PlanState.ERRORED,
        PlanState.RUNNING,  # an Apply a crash interrupted
    ):
        with store.unit_of_work(write=True) as uow:
            uow.events.append("apply_retried", {"from": plan.state.value}, plan_id=plan.plan_id)
            uow.commit()
        return PlanRunner(store, plan.plan_id, options).apply()
    if plan.state is PlanState.ERRORED:
        # e.g. a correction whose replay failed: the correction is made, the run goes on
        _refuse_after_an_unfinished_correction(store, plan)
    if plan.state in (PlanState.ERRORED, PlanState.PAUSED):
        plan = _change(
            store,
            plan.plan_id,
            (plan.state,),
            PlanState.RUNNING,
            "resumed",
            by=options.user if options else None,
            children=_resume_family,
        )
    if plan.state.is_terminal:
        raise UserError(f"plan {plan.plan_id} is {plan.state.value}", _way_on_from(store, plan))
    return PlanRunner(store, plan.plan_id, options).run()


def _resume_family(uow: UnitOfWork, plan: Plan, by: str | None) -> None:
    """A resumed plan's children its pause paused resume with it, and a parent that waits
    for it to run on has its answer."""
    resume_children(uow, plan, by)
    answer_parents_wait(uow, plan, by)


def _way_on_from(store: Store, plan: Plan) -> str:
    """What goes on after an applied or cancelled plan: the open plan a correction appended
    to it, else a new plan."""
    with store.unit_of_work() as uow:
        appended = [c for c in uow.plans.children(plan.plan_id) if not c.state.is_terminal]
    if plan.state is PlanState.APPLIED and appended:
        return f"its appended plan goes on: agents plan run {appended[-1].plan_id}"
    return "start a new plan with `agents plan use`"


def _refuse_after_an_unfinished_correction(store: Store, plan: Plan) -> None:
    """A revert correction that ended with an error (not a clean, restored rollback: a crash,
    or a failure after its resources were rolled back) may have left the resources rolled
    back under decisions that are still current. Running on would build on, or apply, that
    state; running the same correction again is what finishes it."""
    with store.unit_of_work() as uow:
        corrections = uow.corrections.for_plan(plan.plan_id)
        if not corrections:
            return
        last = corrections[-1]
        target = uow.decisions.get(last.target_decision_id)
    unfinished = (
        last.status is CorrectionStatus.FAILED
        and last.mode is CorrectionMode.REVERT
        and "error" in last.report
        and target.superseded_by is None
    )
    if unfinished:
        raise UserError(
            f"plan {plan.plan_id} errored in correction {last.correction_id} "
            f"({last.report['error']}); its resources may be rolled back under decisions "
            "that are still current",
            f"run the correction again: agents plan correct {target.decision_id} "
            f"--mode=revert --guidance {shlex.quote(last.guidance)}",
        )


def apply_plan(store: Store, plan_ref: str, by: str, options: RunOptions | None = None) -> Plan:
    """Answer the Apply gate (approved, by ``by``) and land the changes. Refused, with the
    gate left unanswered, while another runner holds the plan."""
    with store.unit_of_work() as uow:
        plan_id = uow.plans.resolve(plan_ref)
    with run_lease.holding(_sandbox_base(options), plan_id, "applying", store):
        return _answer_and_apply(store, plan_id, by, options)


def _answer_and_apply(store: Store, plan_id: str, by: str, options: RunOptions | None) -> Plan:
    refuse_finished(store, plan_id)
    approve_denied_apply_gate(store, plan_id, by)  # a person who denied it changed their mind
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(plan_id)
        if plan.state is PlanState.PAUSED:  # answering its gate would let `plan run` apply
            raise PlanStateError(
                f"plan {plan_id} is paused",
                f"resume it first (agents plan resume {plan_id}), then apply it",
            )
        pending = uow.approvals.pending(plan.plan_id)
        first = next((a for a in pending if a.kind.value != "apply_gate"), None)
        if first is not None and plan.phase is Phase.EXECUTE:  # e.g. a failed call's question
            raise UserError(
                f"plan {plan_id} waits for an answer before its Apply gate: {first.question}",
                f"answer it first: agents approval approve {first.approval_id} (or deny)",
            )
        for approval in pending:
            if approval.kind.value == "apply_gate":
                record_answer(
                    uow, approval.approval_id, ApprovalAnswer.APPROVED, by, "agents plan apply"
                )
        uow.commit()
    return PlanRunner(store, plan.plan_id, options).apply()


def refuse_finished(store: Store, plan_id: str) -> None:
    """Before the gate is answered: an applied or cancelled plan is never applied (again),
    and refusing it must leave its approvals as they were."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
    if plan.state is PlanState.APPLIED:
        raise PlanStateError(
            f"plan {plan_id} is applied already",
            f"see where it landed with `agents plan show {plan_id}`",
        )
    if plan.state is PlanState.CANCELLED:
        raise PlanStateError(
            f"plan {plan_id} is cancelled: a cancelled plan is never applied",
            f"start a new plan with `agents plan use {shlex.quote(plan.action)}`",
        )


def resume_with(
    store: Store,
    plan_ref: str,
    *,
    choose: int | None = None,
    guidance: str | None = None,
    options: RunOptions | None = None,
) -> Plan:
    """``agents plan resume PLAN --choose N / --guidance TEXT``: the actor decides the point a
    denied escalation stopped at again, with the person's pick or words; then the plan runs
    on (the profile's gate asks about the new choice as it asks about any)."""
    with store.unit_of_work() as uow:
        plan_id = uow.plans.resolve(plan_ref)
        action = Action.model_validate(uow.plan_actions.get(plan_id))
    denied = latest_denial(store, plan_id)
    point = pending_point(denied) if denied is not None else None
    if denied is None or point is None:
        raise UserError(
            f"plan {plan_id} is not paused at a denied decision: --choose and --guidance pick "
            "how a decision not made yet is made",
            "correct a decision already made with agents plan correct DECISION --mode=revert",
        )
    entry = {"key": point, "text": (guidance or "").strip()}
    if choose is not None:
        alternatives = alternatives_of(action, point)
        if not 1 <= choose <= len(alternatives):
            raise UserError(
                f"--choose {choose}: decision {point} has {counted(len(alternatives), 'alternative')}",
                "pick one of those `agents approval deny` listed, counting from 1",
            )
        entry["choose"] = alternatives[choose - 1]
        entry["text"] = entry["text"] or f"The person chose: {entry['choose']}"
    if not entry["text"]:
        raise UserError(
            "the guidance is empty", 'say what the decision should be: --guidance "..."'
        )
    _guide_actor(store, plan_id, entry)
    with store.unit_of_work(write=True) as uow:
        uow.events.append("denied_decision_guided", dict(entry), plan_id=plan_id)
        uow.commit()
    return resume_plan(store, plan_id, options)


def _guide_actor(store: Store, plan_id: str, entry: dict[str, str]) -> None:
    """Add the guidance to the state the actor decides the pending point from."""
    from cleveragents_tui.actors.checkpointer import open_checkpointer  # see runner._run_actor
    from cleveragents_tui.actors.graphs import NODE, Actor

    with store.unit_of_work() as uow:
        phase = uow.plans.get(plan_id).phase
    if phase is Phase.APPLY:
        raise UserError(
            f"plan {plan_id} is in Apply", "correct a decision with agents plan correct"
        )
    with open_checkpointer(store.engine.url) as saver:
        actor = Actor(saver, plan_id, phase, lambda state, ref: {})
        state = actor.state()
        if state is None:
            raise UserError(
                f"plan {plan_id} has made no {phase.value} decision yet",
                f"resume it to be asked again: agents plan resume {plan_id}",
            )
        update = {"guidance": [*state["guidance"], entry], "done": False}
        actor.graph.update_state(actor.config, update, as_node=NODE)
