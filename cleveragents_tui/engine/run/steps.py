"""One step of an actor: gate the proposed decision, record it, run its tool calls and
spawns; or, for a step that recorded its decision before the run stopped, finish what the
decision called for without asking the reasoner again (docs/reliability.md)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from cleveragents_tui.actors.base import (
    ActorState,
    FailedCall,
    Fix,
    FixesFailures,
    Proposal,
    Reasoner,
    ToolCallRequest,
)
from cleveragents_tui.actors.notes import decision_note, result_note, with_notes
from cleveragents_tui.automation.escalation import EscalationContext
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.decision import ActorStateRef, Decision
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.profile import AutomationFlag
from cleveragents_tui.engine.core.recorder import record_decision
from cleveragents_tui.engine.core.tool_calls import ToolCallBlocked, ToolExecutor
from cleveragents_tui.engine.run import children
from cleveragents_tui.engine.run.errors import ReviseStrategy, WaitForApproval
from cleveragents_tui.engine.run.failures import FailureHandling, Fixer
from cleveragents_tui.engine.run.plans import ROOT_KEY
from cleveragents_tui.engine.run.recoveries import RECOVER, chosen_by_a_person

if TYPE_CHECKING:
    from cleveragents_tui.engine.run.runner import PlanRunner


def step(
    runner: PlanRunner,
    reasoner: Reasoner,
    executor: ToolExecutor,
    phase: Phase,
    state: ActorState,
    ref: ActorStateRef,
) -> dict[str, Any]:
    runner.police.check()
    fixes = fixer(runner, reasoner, state)
    with runner.store.unit_of_work() as uow:
        redone = uow.decisions.made_from_actor_checkpoint(
            runner.plan_id, ref.thread_id, ref.checkpoint_id
        )
    if redone is not None:
        # The step ran before and recorded its decision, then stopped (a guard, a failed
        # call, a crash): finish what the decision called for; do not ask again.
        proposal, decision = _resume_step(runner, executor, phase, redone, fixes)
    else:
        found = runner.police.propose(reasoner, state, phase)  # its model calls recorded
        if found is None:
            return {"done": True, "notes": [*state["notes"], f"{phase.value} complete"]}
        proposal = found
        _gate_decision(runner, phase, proposal, state)
        current = runner.current()
        parent = current[proposal.parent_key or ROOT_KEY][0]
        decision = record_decision(
            runner.store,
            runner.sandboxes if phase is Phase.EXECUTE else None,
            plan_id=runner.plan_id,
            phase=phase,
            proposal=proposal,
            parent_id=parent,
            depends_on=[current[k][0] for k in proposal.depends_on if k in current],
            actor_ref=ref,
            context={
                "state": dict(state),
                "proposal": proposal.key,
                "prompt": runner.action.prompt,
                **_what_follows(proposal),
            },
            correction=runner.correction,
        )
        _finish_step(
            runner, executor, phase, proposal, decision, fixes, calls_done=0, spawned=False
        )
    if proposal.revise_strategy:  # also when a re-run step finds its decision recorded
        reason = (
            proposal.rationale or f"the constraints of {proposal.revise_strategy} are too tight"
        )
        raise ReviseStrategy(proposal.revise_strategy, reason)
    notes = [decision_note(proposal)]
    if proposal.tool_calls:
        notes += _results(runner, decision)
    return {"position": state["position"] + 1, "notes": with_notes(state["notes"], *notes)}


def _results(runner: PlanRunner, decision: Decision) -> list[str]:
    """A note of what each call of the decision returned, and each call its retries made
    (a fix, a call made in a failed one's place), in the order they ran. One read when no
    call failed (no retry was made)."""
    with runner.store.unit_of_work() as uow:
        made = [(decision, uow.tool_invocations.for_decision(decision.decision_id))]
        if any(run.ok is False for run in made[0][1]):
            prefix = f"{RECOVER}:{decision.step_key or decision.decision_id}:"
            for child in uow.decisions.current_children(decision.decision_id):
                if (child.step_key or "").startswith(prefix):
                    made.append((child, uow.tool_invocations.for_decision(child.decision_id)))
    runs = [
        (
            run.created_at,
            result_note(
                d.step_key or d.decision_id, n, run.tool, run.arguments, run.ok, run.output or ""
            ),
        )
        for d, invocations in made
        for n, run in enumerate(invocations, 1)
    ]
    return [note for _, note in sorted(runs, key=lambda r: r[0])]


def _resume_step(
    runner: PlanRunner, executor: ToolExecutor, phase: Phase, decision_id: str, fixes: Fixer | None
) -> tuple[Proposal, Decision]:
    """Run the tool calls of a recorded decision that have no record yet, and its spawns
    if they did not happen; returns the proposal as it was recorded (from the decision
    and what its stored context says follows it), and the decision."""
    with runner.store.unit_of_work() as uow:
        decision = uow.decisions.get(decision_id)
        body = uow.contexts.get(decision.context_snapshot.hot_context_hash or "")
        calls_done = len(uow.tool_invocations.for_decision(decision_id))
        spawned = any(
            c.spawning_decision_id == decision_id for c in uow.plans.children(runner.plan_id)
        )
    follows = json.loads(body) if body else {}
    proposal = Proposal(
        key=decision.step_key or "",
        decision_type=decision.decision_type,
        question=decision.question,
        chosen_option=decision.chosen_option,
        rationale=decision.rationale,
        tool_calls=tuple(
            ToolCallRequest(call["tool"], call["arguments"])
            for call in follows.get("tool_calls", [])
        ),
        spawn=tuple(follows.get("spawn", [])),
        revise_strategy=follows.get("revise_strategy"),
    )
    _finish_step(runner, executor, phase, proposal, decision, fixes, calls_done, spawned)
    return proposal, decision


def _finish_step(
    runner: PlanRunner,
    executor: ToolExecutor,
    phase: Phase,
    proposal: Proposal,
    decision: Decision,
    fixes: Fixer | None,
    calls_done: int,
    spawned: bool,
) -> None:
    """The tool calls of a recorded decision (from ``calls_done`` on: calls run in order,
    each recorded as it ends), then its spawns. Strategize is read-only: only its calls of
    tools that read run (the strategy actor looks before it decides; a failed read is
    noted, not retried)."""
    if phase is Phase.EXECUTE:
        failures = FailureHandling(runner, executor, fixes)
        for number, call in enumerate(proposal.tool_calls):
            if number < calls_done:
                failures.settle(decision, call, number)  # a failure a stopped run left
                continue
            _run_call(runner, executor, decision, call, number)
            failures.settle(decision, call, number)  # retried, or a person asked
    else:
        reads = [c for c in proposal.tool_calls if _reads_only(runner, c)]
        if reads[calls_done:]:
            runner.ensure_sandboxes()  # what it reads is what Execute will start from
        for number, call in enumerate(reads[calls_done:], calls_done):
            _run_call(runner, executor, decision, call, number)
    if proposal.spawn and not spawned:
        children.spawn(runner, decision, proposal)


def _run_call(
    runner: PlanRunner,
    executor: ToolExecutor,
    decision: Decision,
    call: ToolCallRequest,
    number: int,
) -> None:
    """Run one call of ``decision``; a guard that stops it asks a person."""
    try:
        outcome = executor.run(decision, call, number)
    except ToolCallBlocked as blocked:
        approval = runner.gates.ask(
            ApprovalKind.GUARD,
            blocked.key,
            blocked.question,
            decision.decision_id,
        )
        raise WaitForApproval(approval) from blocked
    runner.refresh_seal(call, outcome)


def _reads_only(runner: PlanRunner, call: ToolCallRequest) -> bool:
    spec = runner.registry.get(call.tool)
    return spec is not None and spec.reads_only


def fixer(runner: PlanRunner, reasoner: Reasoner, state: ActorState) -> Fixer:
    """Asks ``reasoner`` what to do about a failed call, from the state of this step,
    unless a person chose to be asked when correcting a retry of it."""
    actor = reasoner if isinstance(reasoner, FixesFailures) else None

    def fix(failed: FailedCall) -> Fix | None:
        chosen = chosen_by_a_person(state, failed)
        if chosen is not None or actor is None:
            return chosen
        return runner.police.fix(actor, state, failed)

    return fix


def _gate_decision(runner: PlanRunner, phase: Phase, proposal: Proposal, state: ActorState) -> None:
    flag = AutomationFlag.EDIT_CODE if phase is Phase.STRATEGIZE else AutomationFlag.EXECUTE_COMMAND
    tools = tuple(
        s for s in (runner.registry.get(c.tool) for c in proposal.tool_calls) if s is not None
    )
    invariants = sum(
        1
        for key in runner.current()
        if any(
            p.key == key and p.type is DecisionType.INVARIANT_ENFORCED
            for p in runner.action.decisions
        )
    )
    context = EscalationContext(
        plan_id=runner.plan_id,
        question=f"{proposal.question} → {proposal.chosen_option}",
        decision_type=proposal.decision_type,
        project=runner.plan().project,
        tools=tools,
        invariant_count=invariants,
    )
    runner.gates.gate(
        flag, context.question, f"decision:{proposal.key}", ApprovalKind.ESCALATION, context
    )
    if proposal.spawn:
        runner.gates.gate(
            AutomationFlag.INSTALL_DEPENDENCY,
            f"Spawn {', '.join(proposal.spawn)}?",
            f"spawn:{proposal.key}",
            ApprovalKind.SPAWN,
        )


def _what_follows(proposal: Proposal) -> dict[str, Any]:
    """What a decision calls for after it is recorded, kept in its stored context, so that a
    run stopped between the decision and these can finish them without asking the reasoner
    again (which may decide otherwise, or, scripted, skip a point already decided)."""
    return {
        "tool_calls": [
            {"tool": call.tool, "arguments": dict(call.arguments)} for call in proposal.tool_calls
        ],
        "spawn": list(proposal.spawn),
        "revise_strategy": proposal.revise_strategy,
    }
