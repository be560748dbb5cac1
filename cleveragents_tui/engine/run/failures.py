"""Failed tool calls and validations during Execute (behavior.md: ``max_retries_per_step``,
the ``create_file`` and ``modify_config`` flags; decision types ``error_recovery`` and
``validation_response``).

A call that fails — a test run exiting non-zero, a write to a resource that does not
exist — is never passed over. Under the decision that made the call:

1. the plan records how it handles the failure: a ``validation_response`` decision when the
   tool is a validation (its category, or attached to the action), else ``error_recovery``;
2. it retries the call under that decision while the retries stay within the profile's
   ``max_retries_per_step`` (a validation also within the action's
   ``validation_retry_limit``) and the profile's flag proceeds — ``create_file`` (self-fix
   validation failures) for a validation, ``modify_config`` (retry failures) for any other
   call; a call that passes on a retry settles the failure. Before a retry its actor is
   asked for a fix (``FixesFailures``): for a validation, calls that fix the work, made
   before the validation runs again; for any other call, calls made in its place (none: it
   runs again as it is). The retry decision keeps its calls in its context, so a run stopped
   between them finishes the same fix;
3. otherwise it escalates: a pending approval names the failure and the plan waits. Approve
   goes on with the failure accepted; deny pauses the plan for a correction or a cancel
   (engine/run/denial.py).

So a plan with a failed call never reaches Apply without a person's approval. Everything
is read back from the store, so a run stopped anywhere (a crash, an approval) settles the
same failure where it stopped, without re-running what passed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cleveragents_tui.actors.base import FailedCall, Fix, Proposal, ToolCallRequest
from cleveragents_tui.automation.escalation import EscalationContext
from cleveragents_tui.automation.limits import validation_retry_allowed
from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.call_text import FAILURE_CHARS, failure_summary
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.profile import AutomationFlag
from cleveragents_tui.domain.tool import ToolCategory, ToolInvocation, ToolSpec
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.core.recorder import record_decision
from cleveragents_tui.engine.core.tool_calls import ToolCallBlocked
from cleveragents_tui.engine.run import restore_on_failure
from cleveragents_tui.engine.run.recoveries import (
    ESCALATE,
    RECOVER,
    RETRY,
    STOP_AND_ASK,
    Recoveries,
    Retry,
    decision_type_of,
    failure_key,
    key_base,
    planned_calls,
    ran_line,
    stored_context,
)
from cleveragents_tui.store.correction_queries import failed_calls

if TYPE_CHECKING:
    from cleveragents_tui.engine.core.tool_calls import ToolExecutor
    from cleveragents_tui.engine.run.runner import PlanRunner

MADE_SHOWN = 2000  # characters of each earlier call's arguments a fix is asked with
CALL_FAILED = "call_failed"  # event: a failed run, logged before the decision that answers it

NO_FIX = Fix(())  # a retry that runs the failed call again as it is
Fixer = Callable[[FailedCall], Fix | None]
"""Asks the failed decision's actor for a fix (steps.py binds it to the reasoner)."""


class FailureHandling:
    """Settles the failed calls of one runner's steps (see the module docstring)."""

    def __init__(
        self, runner: PlanRunner, executor: ToolExecutor | None = None, fixer: Fixer | None = None
    ) -> None:
        """Without ``executor`` nothing is retried: a failure left unsettled is asked about.
        Without ``fixer`` a failed call runs again as it is."""
        self._runner = runner
        self._executor = executor
        self._fixer = fixer

    def before_apply(self) -> None:
        """Before the Apply gate, every failed call of the plan's current decisions is settled:
        a replay that did not run its step again (a correction of another decision, or of a
        recovery decision) left it as it was. With an executor (the end of Execute) it is
        fixed and retried as in a step; without one (a plan already past it), asked about."""
        with self._runner.store.unit_of_work() as uow:  # a few statements, any plan size
            failed = uow.run(failed_calls, self._runner.plan_id, f"{RECOVER}:")
        for decision, number, run in failed:
            self.settle(decision, ToolCallRequest(run.tool, dict(run.arguments)), number)

    def settle(self, decision: Decision, call: ToolCallRequest, number: int) -> None:
        """Return when call ``number`` of ``decision`` passed, passed on a retry, or a person
        accepted its failure; otherwise retry it or raise WaitForApproval."""
        from cleveragents_tui.engine.run.errors import WaitForApproval

        first = self._first_run(decision, number)
        if first is None or first.ok is not False:  # passed, or not known to have failed
            return
        spec = self._runner.registry.tool(call.tool).spec
        while True:
            found = self._recoveries(decision, number, call)
            if found.passed:
                return
            pending = next((r for r in found.retries if r.outcome is None), None)
            if pending is not None and self._executor is not None:  # the run stopped before it
                self._retry(pending)
                continue
            if found.escalation is not None:
                key = failure_key(decision.decision_id, number)
                if self._runner.gates.settled(ApprovalKind.ESCALATION, key):
                    return  # a person accepted the failure
                raise WaitForApproval(self._ask(decision, spec, number, found))
            self._said_failed(decision, spec, number, found)
            if self._executor is not None and self._may_retry(decision, spec, number, found):
                fix = self._fix(decision, spec, call, number, found)
                choice = ESCALATE if fix.ask else RETRY  # the actor may stop for a person
                recorded = self._record(decision, spec, call, number, found, choice, fix)
                if not fix.ask:
                    calls, replaces = self._calls(spec, call, fix), self._replaces(spec, fix)
                    self._retry(Retry(recorded, call, calls, replaces=replaces))
            else:  # the loop asks, or finds the question the flag's gate stored
                self._record(decision, spec, call, number, found, ESCALATE)

    # -- what the store says -----------------------------------------------------------------

    def _first_run(self, decision: Decision, number: int) -> ToolInvocation | None:
        with self._runner.store.unit_of_work() as uow:
            runs = uow.tool_invocations.for_decision(decision.decision_id)
        return runs[number] if number < len(runs) else None

    def _recoveries(self, decision: Decision, number: int, call: ToolCallRequest) -> Recoveries:
        prefix = f"{key_base(decision, number)}:"
        with self._runner.store.unit_of_work() as uow:
            mine = [
                d
                for d in uow.decisions.current_children(decision.decision_id)
                if (d.step_key or "").startswith(prefix)
            ]
            made = tuple(uow.tool_invocations.for_decision(decision.decision_id))
            retries = []
            for d in mine:
                if (d.step_key or "").endswith(ESCALATE):
                    continue
                runs = tuple(uow.tool_invocations.for_decision(d.decision_id))
                stored = stored_context(uow.contexts.get(d.context_snapshot.hot_context_hash or ""))
                calls = planned_calls(stored) or (call,)  # recorded before fixes: the call alone
                retries.append(Retry(d, call, calls, runs, bool(stored.get("replaces"))))
        escalation = next((d for d in mine if (d.step_key or "").endswith(ESCALATE)), None)
        return Recoveries(tuple(retries), escalation, made)

    @staticmethod
    def _last_output(number: int, found: Recoveries) -> str:
        """All the last run of the call said (its latest retry's, else its first run's)."""
        runs = [r.outcome for r in found.retries if r.outcome is not None]
        last = runs[-1] if runs else (found.made[number] if number < len(found.made) else None)
        return (last.output or "") if last else ""

    # -- the policy ----------------------------------------------------------------------------

    def _is_validation(self, spec: ToolSpec) -> bool:
        return (
            spec.category is ToolCategory.VALIDATION or spec.name in self._runner.action.validations
        )

    def _retries_allowed(self, spec: ToolSpec) -> int:
        """The profile's retries per step; for a validation, also within the action's
        ``validation_retry_limit`` (what "retry N of M" names)."""
        allowed = self._runner.profile.safety.max_retries_per_step
        if self._is_validation(spec):
            allowed = min(allowed, self._runner.action.limits.validation_retry_limit)
        return allowed

    def _may_retry(
        self, decision: Decision, spec: ToolSpec, number: int, found: Recoveries
    ) -> bool:
        """Within the retry budget, and the profile's flag proceeds at this confidence; below
        its threshold the flag's gate stores the question (with the confidence, the threshold
        and the factors, as any gate's) that the escalation then waits on."""
        retries = len(found.retries)
        if retries >= self._retries_allowed(spec):
            return False
        validation = self._is_validation(spec)
        if validation and not validation_retry_allowed(self._runner.action.limits, retries):
            return False
        flag = AutomationFlag.CREATE_FILE if validation else AutomationFlag.MODIFY_CONFIG
        context = EscalationContext(
            plan_id=decision.plan_id,
            question=self._question(decision, spec, number, found),
            decision_type=decision_type_of(validation),
            decision_id=decision.decision_id,
            project=self._runner.plan().project,
            tools=(spec,),
        )
        key = self._runner.gates.scoped(failure_key(decision.decision_id, number))
        verdict = self._runner.escalation.evaluate(
            flag, self._runner.profile, context, kind=ApprovalKind.ESCALATION, key=key
        )
        return verdict.proceed

    def _calls(
        self, spec: ToolSpec, call: ToolCallRequest, fix: Fix
    ) -> tuple[ToolCallRequest, ...]:
        """What a retry runs: a validation's fix, then the validation; any other call's
        replacement, or (with none) the call again."""
        if self._is_validation(spec):
            return (*fix.tool_calls, call)
        return fix.tool_calls or (call,)

    def _replaces(self, spec: ToolSpec, fix: Fix) -> bool:
        """The fix's calls are made in the failed call's place: it does not run again."""
        return bool(fix.tool_calls) and not self._is_validation(spec)

    # -- what it does ----------------------------------------------------------------------------

    def _record(
        self,
        decision: Decision,
        spec: ToolSpec,
        call: ToolCallRequest,
        number: int,
        found: Recoveries,
        choice: str,
        fix: Fix = NO_FIX,
    ) -> Decision:
        validation = self._is_validation(spec)
        output = failure_summary(self._last_output(number, found))
        tries = len(found.retries) + 1
        what = "validation" if validation else "tool call"
        retry = f"Retry {spec.name}"
        escalate = STOP_AND_ASK
        calls = self._calls(spec, call, fix) if choice == RETRY else ()
        if choice == RETRY:
            fixed = ", ".join(dict.fromkeys(c.tool for c in fix.tool_calls))
            if not fixed:
                done = retry
            elif validation:
                done = f"Fix with {fixed}, then retry {spec.name}"
            else:
                done = f"Replace the failed {spec.name} with {fixed}"
            chosen = f"{done} (retry {tries} of {self._retries_allowed(spec)})"
            key = f"{key_base(decision, number)}:{RETRY}-{tries}"
            rationale = fix.rationale or (
                f"{self._runner.profile.name} retries failed calls automatically"
            )
        else:
            chosen = escalate
            key = f"{key_base(decision, number)}:{ESCALATE}"
            rationale = (
                f"the execution actor makes no fix: {fix.rationale or 'it asks a person'}"
                if fix.ask
                else f"{spec.name} failed {counted(tries, 'time')}: retries used up or not "
                f"automatic under profile {self._runner.profile.name}"
            )
        proposal = Proposal(
            key=key,
            decision_type=decision_type_of(validation),
            question=f"The {what} {spec.name} failed ({output}). What now?",
            chosen_option=chosen,
            alternatives=(retry, escalate),
            rationale=rationale,
            reasoning=fix.reasoning,
            tool_calls=calls,
        )
        return record_decision(
            self._runner.store,
            self._runner.sandboxes,
            plan_id=decision.plan_id,
            phase=Phase.EXECUTE,
            proposal=proposal,
            parent_id=decision.decision_id,
            depends_on=[decision.decision_id],
            actor_ref=decision.context_snapshot.actor_state_ref,
            context={
                "failed_decision": decision.decision_id,
                "call": number,
                "output": output,
                "tool_calls": [{"tool": c.tool, "arguments": dict(c.arguments)} for c in calls],
                "replaces": choice == RETRY and self._replaces(spec, fix),
            },
            correction=self._runner.correction,
        )

    def _said_failed(
        self, decision: Decision, spec: ToolSpec, number: int, found: Recoveries
    ) -> None:
        """The failure in the plan's event log, before the fix is asked for and the decision
        that answers it is recorded: progress lines and the app's status say what failed."""
        run = 1 + sum(1 for r in found.retries if r.outcome is not None)
        output = failure_summary(self._last_output(number, found))
        with self._runner.store.unit_of_work(write=True) as uow:
            uow.events.append(
                CALL_FAILED,
                {
                    "tool": spec.name,
                    "step": decision.step_key or decision.decision_id,
                    "run": run,
                    "output": output,
                },
                plan_id=decision.plan_id,
            )
            uow.commit()

    def _fix(
        self,
        decision: Decision,
        spec: ToolSpec,
        call: ToolCallRequest,
        number: int,
        found: Recoveries,
    ) -> Fix:
        """What the actor does about the failure (nothing without a fixer): for a
        validation, the fix made before it runs again; for any other call, the calls made in
        its place. Asked with the last run's whole kept output."""
        if self._fixer is None:
            return NO_FIX
        output = self._last_output(number, found)
        tried = tuple(
            f"retry {n}: {ran_line(run, FAILURE_CHARS)}"
            for n, retry in enumerate(found.retries, 1)
            for run in retry.fixed_by
        )
        failed = FailedCall(
            decision.step_key or decision.decision_id,
            call,
            output,
            tried,
            tuple(ran_line(run, MADE_SHOWN) for run in found.made[:number]),
            validation=self._is_validation(spec),
            number=number,
        )
        return self._fixer(failed) or NO_FIX

    def _retry(self, retry: Retry) -> None:
        """Run the retry's calls that have not run, in order: its fix, then the failed call.
        A guard that stops one of them asks, as a step's call does, and the run goes on from
        there when resumed."""
        from cleveragents_tui.engine.run.errors import WaitForApproval

        assert self._executor is not None
        if retry.ran == 0:  # approve_plan: back to before the failed call's last run
            restore_on_failure.before_retry(
                self._runner, retry.decision, retry.failed, retry.replaces, self._executor.unchanged
            )
        for number in range(retry.ran, len(retry.calls)):
            call = retry.calls[number]
            try:
                outcome = self._executor.run(retry.decision, call, number)
            except ToolCallBlocked as blocked:
                approval = self._runner.gates.ask(
                    ApprovalKind.GUARD,
                    blocked.key,
                    blocked.question,
                    retry.decision.decision_id,
                )
                raise WaitForApproval(approval) from blocked
            self._runner.refresh_seal(call, outcome)

    def _question(self, decision: Decision, spec: ToolSpec, number: int, found: Recoveries) -> str:
        output = failure_summary(self._last_output(number, found))
        runs = 1 + sum(1 for r in found.retries if r.outcome is not None)
        return (
            f"{spec.name} failed in step {decision.step_key or decision.decision_id} "
            f"({counted(runs, 'run')}; last: {output}). Approve to go on with the failure accepted; "
            "deny to stop here and correct the decision or cancel the plan."
        )

    def _ask(self, decision: Decision, spec: ToolSpec, number: int, found: Recoveries) -> Approval:
        """The retries are used up: a person decides."""
        return self._runner.gates.ask(
            ApprovalKind.ESCALATION,
            failure_key(decision.decision_id, number),
            self._question(decision, spec, number, found),
            decision.decision_id,
        )
