"""The plan lifecycle (behaviour spec; DESIGN.md sections 5-6).

``created`` → Strategize (read-only: the strategy actor decides, no tool may write) →
gate → Execute (the execution actor decides and calls tools in the sandboxes; child plans
run) → gate → Apply (sandboxes land on the real resources) → ``applied``.

Every step the profile does not automate — entering Strategize (``decompose_task``),
each decision (``edit_code`` / ``execute_command``), Strategize → Execute (``create_tool``),
spawning child plans (``install_dependency``), Execute → Apply (``select_tool``), a tool call
a guard escalates — goes through semantic escalation; below the threshold a pending approval
is stored, the plan waits in ``awaiting_approval``, and ``run`` returns. Answering the
approval and running again continues from exactly there (the actor resumes from its
LangGraph checkpoint). ``pause`` and ``cancel`` take effect between steps.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cleveragents_tui import failpoints
from cleveragents_tui.actors.base import (
    ActorState,
    Proposal,
    Reasoner,
    ToolCallRequest,
    ToolOutcome,
)
from cleveragents_tui.actors.notes import decision_note
from cleveragents_tui.actors.reasoners.scripted import ScriptedReasoner
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.automation.escalation import AutonomyController, EscalationContext
from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.apply_journal import ApplyStepState
from cleveragents_tui.domain.approval import Approval, ApprovalAnswer, ApprovalKind
from cleveragents_tui.domain.decision import ActorStateRef, Decision
from cleveragents_tui.domain.dependency import DecisionDependency
from cleveragents_tui.domain.enums import (
    DecisionType,
    DependencyType,
    Phase,
    PlanState,
)
from cleveragents_tui.domain.errors import (
    ConcurrentChangeError,
    DatabaseUnavailableError,
    UserError,
)
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationFlag, AutomationProfile, GuardScope
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core.diff import current_replay, record_snapshots
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.reasoner_choice import (
    CHAT_ACTOR,
    chat_action,
    check_plan_model,
    keep_choice,
    stored_factory,
)
from cleveragents_tui.engine.core.reconcile import OutsideChoice, Reconciler
from cleveragents_tui.engine.core.reconcile import fingerprint as reconcile_fingerprint
from cleveragents_tui.engine.core.recorder import Correction, record_decision
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_root
from cleveragents_tui.engine.core.tool_calls import ToolCallBlocked, ToolExecutor
from cleveragents_tui.engine.read.browse import run_failure
from cleveragents_tui.engine.run import constrained_apply, run_lease
from cleveragents_tui.engine.run.apply_journal import ApplyJournal, landed_record
from cleveragents_tui.engine.run.failures import FailureHandling
from cleveragents_tui.engine.run.plans import create_plan
from cleveragents_tui.engine.run.policing import LimitTerminated, Policing, safety_switches
from cleveragents_tui.engine.run.run_options import RunOptions as RunOptions  # re-exported
from cleveragents_tui.store.store import Store

SCRIPTED_ACTOR = "local/scripted"
ACTORS = frozenset({SCRIPTED_ACTOR, CHAT_ACTOR})
ROOT_KEY = "prompt"

ReasonerFactory = Callable[[Action, Callable[[], dict[str, str]]], Reasoner]


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


def start_plan(
    store: Store,
    action: Action,
    *,
    project: str | None = None,
    profile_override: str | None = None,
    options: RunOptions | None = None,
) -> Plan:
    """``agents plan use``: pre-flight, create the plan (profile locked), run it as far as the
    profile allows."""
    options = options or RunOptions()
    registry = options.registry or default_registry()
    if options.model is not None:
        action = chat_action(action)
    plan, _ = create_plan(
        store,
        action,
        tools=registry,
        actors=ACTORS,
        project=project,
        profile_override=profile_override,
    )
    with store.unit_of_work(write=True) as uow:
        uow.plan_actions.save(plan.plan_id, action.model_dump(mode="json"))
        if options.model is not None:
            keep_choice(uow, plan.plan_id, options.model)
        uow.commit()
    return PlanRunner(store, plan.plan_id, options).run()


class PlanRunner:
    def __init__(
        self,
        store: Store,
        plan_id: str,
        options: RunOptions | None = None,
        *,
        correction: Correction | None = None,
    ) -> None:
        """``correction``: set when replaying after a correction; the decisions made then
        carry ``is_correction`` and ``corrects_decision_id``."""
        self.store = store
        self.plan_id = plan_id
        self.options = options or RunOptions()
        self.registry = self.options.registry or default_registry()
        with store.unit_of_work() as uow:
            self.action = Action.model_validate(uow.plan_actions.get(plan_id))
            plan = uow.plans.get(plan_id)
        self.profile: AutomationProfile = ProfileRegistry(store).get(plan.automation_profile)
        self.sandboxes = PlanSandboxes(store, plan_id, self.options.sandbox_base)
        self.escalation = AutonomyController(store)
        self.police = Policing(  # limits, budgets, safety switches: engine/run/policing.py
            store,
            plan_id,
            self.action.limits,
            self.profile,
            settled=self._settled,
            scoped=self._scoped,
        )
        self._correction = correction

    # -- lifecycle -------------------------------------------------------------------------

    def plan(self) -> Plan:
        with self.store.unit_of_work() as uow:
            return uow.plans.get(self.plan_id)

    def _set(self, **changes: Any) -> Plan:
        with self.store.unit_of_work(write=True) as uow:
            plan = uow.plans.get(self.plan_id)
            saved = uow.plans.save(plan.model_copy(update={**changes, "updated_at": utc_now()}))
            if "state" in changes or "phase" in changes:
                uow.events.append(
                    "plan_state",
                    {"phase": saved.phase.value, "state": saved.state.value},
                    plan_id=self.plan_id,
                )
            uow.commit()
        return saved

    def run(self) -> Plan:
        """Advance the plan as far as the automation profile allows; returns where it stopped.
        Refused (PlanBusyError) while another runner advances it."""
        if self.options.reasoner_factory is None:
            check_plan_model(self.store, self.plan_id)  # its model is ready, before a change
        with run_lease.holding(self.sandboxes.base_dir, self.plan_id, "running", self.store):
            replay = self._go_on_with_replay()
            version = self.plan().version
            try:
                return self._run()
            finally:
                if replay is not None:
                    self._correction = None
                    if self.plan().version != version:  # it went on: where it stopped now
                        record_snapshots(self.store, replay, self.options.sandbox_base)

    def _go_on_with_replay(self) -> str | None:
        """A run that goes on with a revert's replay that stopped (a gate, a pause, an error,
        a crash) makes its decisions as that correction's, as the replay would have made
        them: ``is_correction``, ``corrects_decision_id``, a ``decision_remade`` event; and
        records the correction's diff when it stops (engine/core/diff.py). Returns the
        correction's id; None for the correction's own run, or when there is no replay."""
        if self._correction is not None:
            return None
        found = current_replay(self.store, self.plan_id)
        if found is None:
            return None

        def before_apply() -> None:
            record_snapshots(self.store, found.correction_id, self.options.sandbox_base)

        self._correction = Correction(
            found.target_decision_id, found.guidance, before_apply=before_apply
        )
        return found.correction_id

    def _run(self) -> Plan:
        plan = self.plan()
        if plan.state.is_terminal:
            return plan
        if plan.state is PlanState.PAUSED:
            return plan
        if plan.state is PlanState.AWAITING_APPROVAL:
            if self._pending():
                return plan
            plan = self._set(state=PlanState.RUNNING)
        if self._failed_run(plan):  # e.g. a child plan's, retried by its parent's run
            plan = self._set(state=PlanState.RUNNING)
        try:
            from cleveragents_tui.actors.checkpointer import open_checkpointer  # see _run_actor

            with open_checkpointer(self.store.engine.url) as saver:
                return self._seal_if_stopped(self._advance(saver))
        except ReviseStrategy as revise:
            return self._revert_to_strategize(revise)
        except WaitForApproval:
            return self._seal_if_stopped(self._set(state=PlanState.AWAITING_APPROVAL))
        except LimitTerminated as ended:  # on_exceed: terminate
            self._errored(ended.reason)
            return self.plan()
        except SandboxUnavailableError as failed:  # this plan's, or a child plan's
            self._errored(failed.reason)
            if failed.plan_id == self.plan_id:
                raise
            raise SandboxUnavailableError(self.plan_id, failed.reason) from failed

    def _failed_run(self, plan: Plan) -> bool:
        with self.store.unit_of_work() as uow:
            return run_failure(uow, plan) is not None

    def _errored(self, reason: str) -> None:
        """End the run ``errored`` with its reason (a ``plan_errored`` event naming the plan
        version it applies to, which `plan show` prints), not ``running`` as if a process
        still advanced it: `agents plan run` retries once the cause is fixed."""
        with self.store.unit_of_work(write=True) as uow:
            plan = uow.plans.get(self.plan_id)
            if plan.state.is_terminal:
                return
            saved = uow.plans.save(
                plan.model_copy(update={"state": PlanState.ERRORED, "updated_at": utc_now()})
            )
            uow.events.append(
                "plan_state",
                {"phase": saved.phase.value, "state": saved.state.value},
                plan_id=self.plan_id,
            )
            uow.events.append(
                "plan_errored", {"reason": reason, "version": saved.version}, plan_id=self.plan_id
            )
            uow.commit()

    def _advance(self, saver: Any) -> Plan:
        plan = self.plan()
        if plan.phase is Phase.APPLY and plan.state is PlanState.RUNNING:
            return self.apply()  # an Apply a crash interrupted: land the rest
        if plan.phase is Phase.STRATEGIZE:
            if ROOT_KEY not in self._current():  # not started: the gate was never passed
                self._gate(
                    AutomationFlag.DECOMPOSE_TASK, "Start Strategize for this plan?", "strategize"
                )
                self._record_root()
                plan = self._set(state=PlanState.RUNNING)
            if not self._run_actor(saver, Phase.STRATEGIZE):
                return self.plan()
            self._gate(AutomationFlag.CREATE_TOOL, "Strategy complete. Start Execute?", "execute")
            plan = self._set(phase=Phase.EXECUTE, state=PlanState.RUNNING)
        if plan.phase is Phase.EXECUTE and plan.state is not PlanState.COMPLETED:
            self._ensure_sandboxes()
            self._reconcile()
            self._run_children()
            if not self._run_actor(saver, Phase.EXECUTE):
                return self.plan()
            plan = self._set(state=PlanState.COMPLETED)
        if plan.phase is Phase.EXECUTE and plan.state is PlanState.COMPLETED:
            if self._landed_by_parent():
                return self.plan()  # a child waits: its parent's Apply lands it
            self.police.check()
            FailureHandling(self).before_apply()  # no failed call reaches Apply unasked
            self._gate(
                AutomationFlag.SELECT_TOOL,
                "Execute complete. Apply the changes?",
                "apply",
                kind=ApprovalKind.APPLY_GATE,
            )
            if self._correction is not None and self._correction.before_apply is not None:
                self._correction.before_apply()  # a replay going on through Apply
            return self.apply()
        return self.plan()

    def _revert_to_strategize(self, revise: ReviseStrategy) -> Plan:
        """Phase reversion: Execute → Strategize at the strategy decision that was too tight,
        as a correction made by the execution actor (gated by ``delete_content``)."""
        from cleveragents_tui.domain.enums import CorrectionMode
        from cleveragents_tui.engine.correct.correction import execute, preview

        try:
            self._gate(
                AutomationFlag.DELETE_CONTENT,
                f"The execution actor reports: {revise.reason}. Revise the strategy?",
                f"revise:{revise.key}",
            )
        except WaitForApproval:
            return self._set(state=PlanState.AWAITING_APPROVAL)
        target = self._current()[revise.key][0]
        impact = preview(self.store, target, CorrectionMode.REVERT, revise.reason)
        return execute(
            self.store,
            impact,
            acknowledged=True,
            requested_by="execution actor",
            options=self.options,
            # _reconcile asked about edits made while the plan waited; one made while it
            # runs is taken in, as the next seal would take it (docs/reconciliation.md)
            outside=OutsideChoice.KEEP,
        ).plan

    # -- reconciliation (engine/core/reconcile.py) ---------------------------------------------------

    def _reconciler(self) -> Reconciler:
        return Reconciler(self.sandboxes, self.action.resources, self.plan().attempt)

    def _seal_if_stopped(self, plan: Plan) -> Plan:
        """Stopped in Execute (for a person, a pause, the Apply gate): remember the sandboxes
        as the plan leaves them, so changes made meanwhile by someone else are noticed."""
        if plan.phase is Phase.EXECUTE and not plan.state.is_terminal:
            self._reconciler().seal()
        return plan

    def _reconcile(self) -> None:
        """Before going on in Execute or applying: files changed outside the plan since it
        stopped wait for a person — approve keeps them, deny discards them."""
        reconciler = self._reconciler()
        changes = reconciler.outside_changes()
        if not changes:
            return
        key = f"reconcile:{reconcile_fingerprint(changes)}"
        answers = self._answers(ApprovalKind.RECONCILE, key)
        summaries = [c.summary() for c in changes]
        if not answers:
            with self.store.unit_of_work(write=True) as uow:
                uow.events.append(
                    "sandbox_changed_outside",
                    {"changes": summaries, "count": sum(len(c.paths) for c in changes)},
                    plan_id=self.plan_id,
                )
                uow.commit()
            question = (
                f"Files changed in the sandbox outside the plan — {'; '.join(summaries)}. "
                "Approve to keep them (the next checkpoint records them), deny to discard them."
            )
            raise WaitForApproval(self._ask(ApprovalKind.RECONCILE, key, question))
        latest = answers[-1]
        if latest.answer is None:
            raise WaitForApproval(latest)
        if latest.answer is ApprovalAnswer.APPROVED:
            reconciler.keep()
            kind = "outside_changes_kept"
        else:
            reconciler.discard(changes)
            kind = "outside_changes_discarded"
        with self.store.unit_of_work(write=True) as uow:
            uow.events.append(
                kind, {"changes": summaries, "by": latest.answered_by}, plan_id=self.plan_id
            )
            uow.commit()

    def _keep_going(self) -> bool:
        return self.plan().state is PlanState.RUNNING

    # -- gates and approvals ------------------------------------------------------------------

    def _scoped(self, key: str) -> str:
        """Approvals belong to one attempt: after a correction every gate is asked again."""
        return f"{key}@{self.plan().attempt}"

    def _answers(self, kind: ApprovalKind, key: str) -> list[Approval]:
        with self.store.unit_of_work() as uow:
            everything = uow.approvals.for_plan(self.plan_id)
        scoped = self._scoped(key)
        return [a for a in everything if a.kind is kind and a.details.get("key") == scoped]

    def _pending(self) -> list[Approval]:
        with self.store.unit_of_work() as uow:
            return uow.approvals.pending(self.plan_id)

    def _settled(self, kind: ApprovalKind, key: str) -> bool:
        """True if a person approved this; WaitForApproval if still pending; False if never
        asked, or denied: a denial paused the plan (engine/run/denial.py), and a plan resumed
        without another choice is asked again."""
        answers = self._answers(kind, key)
        if not answers or answers[-1].answer is ApprovalAnswer.DENIED:
            return False
        latest = answers[-1]
        if latest.answer is ApprovalAnswer.APPROVED:
            return True
        raise WaitForApproval(latest)

    def _gate(
        self,
        flag: AutomationFlag,
        question: str,
        key: str,
        kind: ApprovalKind = ApprovalKind.PHASE_GATE,
        context: EscalationContext | None = None,
    ) -> None:
        if self._settled(kind, key):
            return
        context = context or EscalationContext(
            plan_id=self.plan_id, question=question, project=self.plan().project
        )
        profile, context = safety_switches(self.profile, flag, context)
        verdict = self.escalation.evaluate(flag, profile, context, kind=kind, key=self._scoped(key))
        if not verdict.proceed:
            assert verdict.approval is not None
            raise WaitForApproval(verdict.approval)

    # -- decisions ------------------------------------------------------------------------

    def _record_root(self) -> None:
        """The plan's prompt_definition, once."""
        if ROOT_KEY in self._current():
            return
        decision = Decision(
            plan_id=self.plan_id,
            sequence_number=0,
            decision_type=DecisionType.PROMPT_DEFINITION,
            phase=Phase.STRATEGIZE,
            question="What should this plan achieve?",
            chosen_option=self.action.prompt,
            rationale=self.action.description or None,
            step_key=ROOT_KEY,
        )
        with self.store.unit_of_work(write=True) as uow:
            uow.decisions.add(decision)
            uow.commit()
        OPEN_GRAPHS.recorded(decision)

    def _current(self) -> dict[str, tuple[str, str]]:
        with self.store.unit_of_work() as uow:
            return uow.decisions.current_steps(self.plan_id)

    def _reasoner(self) -> Reasoner:
        def chosen() -> dict[str, str]:
            return {key: option for key, (_, option) in self._current().items()}

        factory = self.options.reasoner_factory or stored_factory(
            self.store, self.plan_id, self.registry
        )
        return factory(self.action, chosen) if factory else ScriptedReasoner(self.action, chosen)

    def _run_actor(self, saver: Any, phase: Phase) -> bool:
        reasoner = self._reasoner()
        executor = ToolExecutor(
            plan_id=self.plan_id,
            phase=phase,
            profile=self.profile,
            registry=self.registry,
            sandboxes=self.sandboxes,
            scope=GuardScope.SUBPLAN if self.plan().parent_plan_id else GuardScope.PLAN,
            approved=lambda tool: self._settled(ApprovalKind.GUARD, tool),
            before_call=lambda tool: self.police.check(tool=tool),  # retries' calls too
            spent=self.police.cost_usd,  # guards.max_total_cost counts the model's cost
        )

        def step(state: ActorState, ref: ActorStateRef) -> dict[str, Any]:
            return self._step(reasoner, executor, phase, state, ref)

        # langgraph is imported when a plan first runs, not with this module: the app (and
        # each browser tab of `agents serve`) imports the engine to browse plans, and
        # langgraph with langchain_core is most of that import's time.
        from cleveragents_tui.actors.graphs import Actor

        return Actor(saver, self.plan_id, phase, step).run(self._keep_going)

    def _step(
        self,
        reasoner: Reasoner,
        executor: ToolExecutor,
        phase: Phase,
        state: ActorState,
        ref: ActorStateRef,
    ) -> dict[str, Any]:
        self.police.check()
        with self.store.unit_of_work() as uow:
            redone = uow.decisions.made_from_actor_checkpoint(
                self.plan_id, ref.thread_id, ref.checkpoint_id
            )
        if redone is not None:
            # The step ran before and recorded its decision, then stopped (a guard, a failed
            # call, a crash): finish what the decision called for; do not ask again.
            proposal = self._resume_step(executor, phase, redone)
        else:
            found = self.police.propose(reasoner, state, phase)  # its model calls recorded
            if found is None:
                return {"done": True, "notes": [*state["notes"], f"{phase.value} complete"]}
            proposal = found
            self._gate_decision(phase, proposal, state)
            current = self._current()
            parent = current[proposal.parent_key or ROOT_KEY][0]
            decision = record_decision(
                self.store,
                self.sandboxes if phase is Phase.EXECUTE else None,
                plan_id=self.plan_id,
                phase=phase,
                proposal=proposal,
                parent_id=parent,
                depends_on=[current[k][0] for k in proposal.depends_on if k in current],
                actor_ref=ref,
                context={
                    "state": dict(state),
                    "proposal": proposal.key,
                    "prompt": self.action.prompt,
                    **_what_follows(proposal),
                },
                correction=self._correction,
            )
            self._finish_step(executor, phase, proposal, decision, calls_done=0, spawned=False)
        if proposal.revise_strategy:  # also when a re-run step finds its decision recorded
            reason = (
                proposal.rationale or f"the constraints of {proposal.revise_strategy} are too tight"
            )
            raise ReviseStrategy(proposal.revise_strategy, reason)
        note = decision_note(proposal)
        return {"position": state["position"] + 1, "notes": [*state["notes"], note]}

    def _resume_step(self, executor: ToolExecutor, phase: Phase, decision_id: str) -> Proposal:
        """Run the tool calls of a recorded decision that have no record yet, and its spawns
        if they did not happen; returns the proposal as it was recorded (from the decision
        and what its stored context says follows it)."""
        with self.store.unit_of_work() as uow:
            decision = uow.decisions.get(decision_id)
            body = uow.contexts.get(decision.context_snapshot.hot_context_hash or "")
            calls_done = len(uow.tool_invocations.for_decision(decision_id))
            spawned = any(
                c.spawning_decision_id == decision_id for c in uow.plans.children(self.plan_id)
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
        self._finish_step(executor, phase, proposal, decision, calls_done, spawned)
        return proposal

    def _finish_step(
        self,
        executor: ToolExecutor,
        phase: Phase,
        proposal: Proposal,
        decision: Decision,
        calls_done: int,
        spawned: bool,
    ) -> None:
        """The tool calls of a recorded decision (from ``calls_done`` on: calls run in order,
        each recorded as it ends), then its spawns."""
        if phase is Phase.EXECUTE:  # Strategize is read-only: tool calls belong to Execute
            failures = FailureHandling(self, executor)
            for number, call in enumerate(proposal.tool_calls):
                if number < calls_done:
                    failures.settle(decision, call, number)  # a failure a stopped run left
                    continue
                try:
                    outcome = executor.run(decision, call, number)
                except ToolCallBlocked as blocked:
                    approval = self._ask(
                        ApprovalKind.GUARD,
                        blocked.tool,
                        f"Allow {blocked.tool}? {blocked.reason}",
                        decision.decision_id,
                    )
                    raise WaitForApproval(approval) from blocked
                self._refresh_seal(call, outcome)
                failures.settle(decision, call, number)  # retried, or a person asked
        if proposal.spawn and not spawned:
            self._spawn(decision, proposal)

    def _refresh_seal(self, call: ToolCallRequest, outcome: ToolOutcome) -> None:
        """The plan's own writes are part of the sealed state (even a call that declares no
        writes, such as tests leaving __pycache__ behind)."""
        named = call.arguments.get("resource")
        self._reconciler().refresh([*outcome.writes, *([named] if isinstance(named, str) else [])])

    def _gate_decision(self, phase: Phase, proposal: Proposal, state: ActorState) -> None:
        flag = (
            AutomationFlag.EDIT_CODE
            if phase is Phase.STRATEGIZE
            else AutomationFlag.EXECUTE_COMMAND
        )
        tools = tuple(
            s for s in (self.registry.get(c.tool) for c in proposal.tool_calls) if s is not None
        )
        invariants = sum(
            1
            for key in self._current()
            if any(
                p.key == key and p.type is DecisionType.INVARIANT_ENFORCED
                for p in self.action.decisions
            )
        )
        context = EscalationContext(
            plan_id=self.plan_id,
            question=f"{proposal.question} → {proposal.chosen_option}",
            decision_type=proposal.decision_type,
            project=self.plan().project,
            tools=tools,
            invariant_count=invariants,
        )
        self._gate(
            flag, context.question, f"decision:{proposal.key}", ApprovalKind.ESCALATION, context
        )
        if proposal.spawn:
            self._gate(
                AutomationFlag.INSTALL_DEPENDENCY,
                f"Spawn {', '.join(proposal.spawn)}?",
                f"spawn:{proposal.key}",
                ApprovalKind.SPAWN,
            )

    def _ask(
        self, kind: ApprovalKind, key: str, question: str, decision_id: str | None = None
    ) -> Approval:
        approval = Approval(
            plan_id=self.plan_id,
            decision_id=decision_id,
            kind=kind,
            question=question,
            details={"key": self._scoped(key)},
        )
        with self.store.unit_of_work(write=True) as uow:
            uow.approvals.add(approval)
            uow.commit()
        return approval

    # -- child plans, sandboxes, apply --------------------------------------------------------

    def _spawn(self, decision: Decision, proposal: Proposal) -> None:
        parent = self.plan()
        for name in proposal.spawn:
            child_action = self.action.subaction(name)
            child, _ = create_plan(
                self.store,
                child_action,
                tools=self.registry,
                actors=ACTORS,
                project=parent.project,
                parent=parent,
                spawning_decision_id=decision.decision_id,
            )
            with self.store.unit_of_work(write=True) as uow:
                uow.plan_actions.save(child.plan_id, child_action.model_dump(mode="json"))
                uow.decisions.add_dependency(
                    DecisionDependency(
                        upstream_decision_id=decision.decision_id,
                        downstream_ref=child.plan_id,
                        dependency_type=DependencyType.PLAN,
                    )
                )
                uow.events.append(
                    "child_spawned", {"child": child.plan_id, "action": name}, plan_id=self.plan_id
                )
                uow.commit()
            OPEN_GRAPHS.spawned(decision.decision_id, child.plan_id)

    def _children(self) -> list[Plan]:
        with self.store.unit_of_work() as uow:
            return [c for c in uow.plans.children(self.plan_id) if not c.state.is_terminal]

    def _run_children(self) -> None:
        """Run child plans to their Apply gate; children of one parallel spawn run concurrently."""
        waiting = [c for c in self._children() if c.state is not PlanState.COMPLETED]
        if not waiting:
            return
        with ThreadPoolExecutor(
            max_workers=max(1, len(waiting)), thread_name_prefix="child-plan"
        ) as pool:
            results = list(pool.map(self._run_child, waiting))
        stuck = [p for p in results if p.state is not PlanState.COMPLETED]
        if stuck:
            child = stuck[0]
            approval = self._ask(
                ApprovalKind.SPAWN,
                f"child:{child.plan_id}",
                f"Child plan {child.plan_id} ({child.action}) stopped in {child.state.value}; "
                "resume it, then approve to continue",
            )
            raise WaitForApproval(approval)

    def _run_child(self, child: Plan) -> Plan:
        options = RunOptions(
            self.options.registry,
            self.options.sandbox_base,
            self.options.reasoner_factory,
            self.options.user,
        )
        return PlanRunner(self.store, child.plan_id, options).run()

    def _ensure_sandboxes(self) -> None:
        with self.store.unit_of_work() as uow:
            resources = {r.resource_id: r for r in uow.resources.all()}
            have = uow.checkpoints.resources_checkpointed(self.plan_id, decision_groups_only=False)
        for resource_id in self.action.resources:
            if resource_id in have:
                continue
            resource = resources[resource_id]
            root = sandbox_root(self.sandboxes.base_dir, self.sandboxes.host_plan_id, resource_id)
            try:
                if root.exists():
                    own = self.sandboxes.host_plan_id == self.plan_id
                    if not (own and resource.rollbackable):
                        continue  # made (a none sandbox has no baseline), or the host plan's
                    # Its baseline checkpoint was never recorded: a crash while it was made.
                    self.sandboxes.clear_interrupted(resource)
                self.sandboxes.create(resource)
            except (ConcurrentChangeError, DatabaseUnavailableError):
                raise  # another process's doing, or no store to record anything in
            except (UserError, OSError, subprocess.SubprocessError) as exc:
                raise SandboxUnavailableError.of(self.plan_id, resource_id, exc) from exc

    def apply(self) -> Plan:
        """Land every sandbox (this plan's and its completed children's) on the real resources.

        A resource that refuses (the real resource changed meanwhile, a conflict) leaves the
        plan ``constrained`` in Apply; any other failure leaves it ``errored``. Both can be
        corrected; an applied plan cannot. Refused (PlanBusyError) while another runner
        advances the plan.
        """
        with run_lease.holding(self.sandboxes.base_dir, self.plan_id, "applying", self.store):
            return self._apply()

    def _apply(self) -> Plan:
        plan = self.plan()
        gate_reached = bool(self._answers(ApprovalKind.APPLY_GATE, "apply"))
        ready = plan.phase is Phase.EXECUTE and (
            plan.state is PlanState.COMPLETED
            or (plan.state in (PlanState.AWAITING_APPROVAL, PlanState.RUNNING) and gate_reached)
        )
        # A retry: an Apply that was refused, failed, or interrupted by a crash (every
        # sandbox's apply can be repeated).
        ready = ready or (
            plan.phase is Phase.APPLY
            and plan.state in (PlanState.CONSTRAINED, PlanState.ERRORED, PlanState.RUNNING)
        )
        if not ready:
            raise PlanStateError(
                f"plan {self.plan_id} is {plan.phase.value} · {plan.state.value}: Execute has not completed",
                f"run it until it waits at the Apply gate: agents plan run {self.plan_id}",
            )
        if plan.state is PlanState.CONSTRAINED and (reverted := constrained_apply.answered(self)):
            return reverted  # a person approved going back to Strategize
        try:
            self._reconcile()
        except WaitForApproval:
            return self._set(state=PlanState.AWAITING_APPROVAL)
        self._take_for_apply(plan.attempt)
        results: list[str] = []
        try:
            results.extend(self._land_children())
            results.extend(self.apply_own())
        except UserError as exc:
            self._apply_failed(PlanState.CONSTRAINED, str(exc))
            return constrained_apply.after_refusal(self, str(exc))  # access_network
        except Exception as exc:
            self._apply_failed(PlanState.ERRORED, str(exc))
            raise
        with self.store.unit_of_work(write=True) as uow:
            uow.events.append(
                "plan_applied", {"results": results}, plan_id=self.plan_id, actor=self.options.user
            )
            uow.commit()
        return self.plan()

    def _take_for_apply(self, attempt: int) -> None:
        """Mark the plan as being applied (Apply · running), under the plan-row lock: a
        correction that is running, or that made a new attempt since this Apply was
        approved, makes it refuse; a correction that starts now is refused as busy. The
        correction this runner replays is running until its replay stops: an automatic Apply
        at the end of the replay is part of it."""
        with self.store.unit_of_work(write=True) as uow:
            plan = uow.plans.lock(self.plan_id)
            running = uow.corrections.running(self.plan_id)
            replaying = (
                self._correction is not None
                and running is not None
                and running.target_decision_id == self._correction.corrects_decision_id
            )
            if running is not None and not replaying:
                raise ConcurrentChangeError(
                    f"plan {self.plan_id} is busy: correction {running.correction_id} is running",
                    "wait for it to finish; its new attempt asks for the Apply gate again",
                )
            if plan.attempt != attempt:
                raise ConcurrentChangeError(
                    f"plan {self.plan_id} changed: a correction made attempt {plan.attempt} "
                    "since this Apply was approved",
                    f"answer the new attempt's Apply gate: agents plan run {self.plan_id}",
                )
            uow.plans.save(
                plan.model_copy(
                    update={
                        "phase": Phase.APPLY,
                        "state": PlanState.RUNNING,
                        "updated_at": utc_now(),
                    }
                )
            )
            uow.events.append("apply_started", {"attempt": attempt}, plan_id=self.plan_id)
            uow.commit()

    def _apply_failed(self, state: PlanState, reason: str) -> Plan:
        with self.store.unit_of_work(write=True) as uow:
            uow.events.append(
                "apply_failed", {"state": state.value, "reason": reason}, plan_id=self.plan_id
            )
            uow.commit()
        return self._set(phase=Phase.APPLY, state=state)

    def _landed_by_parent(self) -> bool:
        """A child plan is landed by its parent's Apply, unless the parent has already been
        applied (a plan appended to an applied plan): then it goes to its own Apply gate."""
        parent_id = self.plan().parent_plan_id
        if parent_id is None:
            return False
        with self.store.unit_of_work() as uow:
            return uow.plans.get(parent_id).state is not PlanState.APPLIED

    def _land_children(self) -> list[str]:
        """Land the open child plans, and theirs (an appended plan's spawns), before this one.
        An appended plan works in this plan's sandboxes: they land once, with this plan's."""
        results: list[str] = []
        for child in self._children():
            runner = PlanRunner(self.store, child.plan_id, self.options)
            results.extend(runner._land_children())
            shared = runner.sandboxes.host_plan_id != child.plan_id
            results.extend(runner.apply_own(land=not shared))
        return results

    def apply_own(self, *, land: bool = True) -> list[str]:
        """Land this plan's sandboxes (unless ``land`` is False: they are its host's, which
        lands them) and mark the plan applied. Each resource goes planned → landing → landed
        in the apply journal before the step, so a rerun after a crash skips what landed and
        lands the rest (engine/run/apply_journal.py)."""
        if not land:
            self._set(phase=Phase.APPLY, state=PlanState.APPLIED)
            return [f"{self.plan_id}: landed with the sandboxes of {self.sandboxes.host_plan_id}"]
        sandboxes = {rid: self.sandboxes.get(rid) for rid in self.action.resources}
        journal = ApplyJournal(self.store, self.plan_id, self.plan().attempt)
        steps = journal.plan([(rid, sb.resource.sandbox_strategy) for rid, sb in sandboxes.items()])
        results = []
        for step in steps:
            resource_id = step.resource_id
            if step.state is ApplyStepState.LANDED:  # a crashed run landed it: not again
                results.append(f"{resource_id}: {step.landed.get('summary', 'landed')}")
                continue
            journal.landing(resource_id)
            failpoints.hit("apply.resource", resource_id)
            sandbox = sandboxes[resource_id]
            result = sandbox.apply()
            failpoints.hit("apply.landed", resource_id)
            journal.landed(resource_id, landed_record(sandbox, self.sandboxes.host_plan_id, result))
            results.append(f"{resource_id}: {result.summary}")
        self._set(phase=Phase.APPLY, state=PlanState.APPLIED)
        return results


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
