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

import subprocess
from typing import Any

from cleveragents_tui.actors.base import (
    ActorState,
    Reasoner,
    ToolCallRequest,
    ToolOutcome,
)
from cleveragents_tui.actors.reasoners.scripted import ScriptedReasoner
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.automation.escalation import AutonomyController
from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import ApprovalAnswer, ApprovalKind
from cleveragents_tui.domain.decision import ActorStateRef, Decision
from cleveragents_tui.domain.enums import (
    DecisionType,
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
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.reasoner_choice import (
    chat_action,
    check_plan_model,
    keep_choice,
    stored_factory,
)
from cleveragents_tui.engine.core.reconcile import Reconciler
from cleveragents_tui.engine.core.reconcile import fingerprint as reconcile_fingerprint
from cleveragents_tui.engine.core.recorder import Correction
from cleveragents_tui.engine.core.replay_snapshots import current_replay, record_snapshots
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_root
from cleveragents_tui.engine.core.tool_calls import ToolExecutor
from cleveragents_tui.engine.run import apply as plan_apply
from cleveragents_tui.engine.run import children, reversion, run_lease, steps
from cleveragents_tui.engine.run.errors import (
    ReasonerFailedError,
    ReviseStrategy,
    SandboxUnavailableError,
    WaitForApproval,
    record_errored,
    run_failure,
)
from cleveragents_tui.engine.run.failures import FailureHandling
from cleveragents_tui.engine.run.gates import Gates
from cleveragents_tui.engine.run.plans import ACTORS, ROOT_KEY, create_plan
from cleveragents_tui.engine.run.policing import LimitTerminated, Policing
from cleveragents_tui.engine.run.run_options import RunOptions as RunOptions  # re-exported
from cleveragents_tui.store.store import Store


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
    """Advances one plan through its phases; run/ helpers (gates, steps, children, apply)
    act on it."""

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
        self.gates = Gates(store, plan_id, self.profile, self.escalation, self.plan)
        self.police = Policing(  # limits, budgets, safety switches: engine/run/policing.py
            store,
            plan_id,
            self.action.limits,
            self.profile,
            settled=self.gates.settled,
            scoped=self.gates.scoped,
        )
        self.correction = correction

    # -- lifecycle -------------------------------------------------------------------------

    def plan(self) -> Plan:
        with self.store.unit_of_work() as uow:
            return uow.plans.get(self.plan_id)

    def update_plan(self, **changes: Any) -> Plan:
        """Save ``changes`` to the plan (a ``plan_state`` event when its phase or state moves)."""
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
        if self.options.on_start is not None:
            self.options.on_start(self.plan_id)
        with run_lease.holding(self.sandboxes.base_dir, self.plan_id, "running", self.store):
            replay = self._go_on_with_replay()
            version = self.plan().version
            try:
                return self._run()
            finally:
                if replay is not None:
                    self.correction = None
                    if self.plan().version != version:  # it went on: where it stopped now
                        record_snapshots(self.store, replay, self.options.sandbox_base)

    def _go_on_with_replay(self) -> str | None:
        """A run that goes on with a revert's replay that stopped (a gate, a pause, an error,
        a crash) makes its decisions as that correction's, as the replay would have made
        them: ``is_correction``, ``corrects_decision_id``, a ``decision_remade`` event; and
        records the correction's diff when it stops (engine/core/replay_snapshots.py). Returns the
        correction's id; None for the correction's own run, or when there is no replay."""
        if self.correction is not None:
            return None
        found = current_replay(self.store, self.plan_id)
        if found is None:
            return None

        def before_apply() -> None:
            record_snapshots(self.store, found.correction_id, self.options.sandbox_base)

        self.correction = Correction(
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
            if self.gates.pending():
                return plan
            plan = self.update_plan(state=PlanState.RUNNING)
        if self._failed_run(plan):  # e.g. a child plan's, retried by its parent's run
            plan = self.update_plan(state=PlanState.RUNNING)
        try:
            from cleveragents_tui.actors.checkpointer import open_checkpointer  # see _run_actor

            with open_checkpointer(self.store.engine.url) as saver:
                return self._seal_if_stopped(self._advance(saver))
        except ReviseStrategy as revise:
            return self._revert_to_strategize(revise)
        except WaitForApproval:
            return self._seal_if_stopped(self.update_plan(state=PlanState.AWAITING_APPROVAL))
        except LimitTerminated as ended:  # on_exceed: terminate
            self._errored(ended.reason)
            return self.plan()
        except ReasonerFailedError as failed:  # no decision from the model: errored, not running
            self._errored(failed.reason)
            if failed.plan_id == self.plan_id:
                raise
            raise ReasonerFailedError(self.plan_id, failed.reason) from failed  # a child's
        except SandboxUnavailableError as failed:  # this plan's, or a child plan's
            self._errored(failed.reason)
            if failed.plan_id == self.plan_id:
                raise
            raise SandboxUnavailableError(self.plan_id, failed.reason) from failed

    def _failed_run(self, plan: Plan) -> bool:
        with self.store.unit_of_work() as uow:
            return run_failure(uow, plan) is not None

    def _errored(self, reason: str) -> None:
        record_errored(self.store, self.plan_id, reason)

    def _advance(self, saver: Any) -> Plan:
        plan = self.plan()
        if plan.phase is Phase.APPLY and plan.state is PlanState.RUNNING:
            return self.apply()  # an Apply a crash interrupted: land the rest
        if plan.phase is Phase.STRATEGIZE:
            if ROOT_KEY not in self.current():  # not started: the gate was never passed
                self.gates.gate(
                    AutomationFlag.DECOMPOSE_TASK, "Start Strategize for this plan?", "strategize"
                )
                self._record_root()
                plan = self.update_plan(state=PlanState.RUNNING)
            if not self._run_actor(saver, Phase.STRATEGIZE):
                return self.plan()
            self.gates.gate(
                AutomationFlag.CREATE_TOOL, "Strategy complete. Start Execute?", "execute"
            )
            plan = self.update_plan(phase=Phase.EXECUTE, state=PlanState.RUNNING)
        if plan.phase is Phase.EXECUTE and plan.state is not PlanState.COMPLETED:
            self.ensure_sandboxes()
            self.reconcile()
            children.run_children(self)
            if not self._run_actor(saver, Phase.EXECUTE):
                return self.plan()
            plan = self.update_plan(state=PlanState.COMPLETED)
        if plan.phase is Phase.EXECUTE and plan.state is PlanState.COMPLETED:
            if children.landed_by_parent(self):
                return self.plan()  # a child waits: its parent's Apply lands it
            self.police.check()
            FailureHandling(self).before_apply()  # no failed call reaches Apply unasked
            self.gates.gate(
                AutomationFlag.SELECT_TOOL,
                "Execute complete. Apply the changes?",
                "apply",
                kind=ApprovalKind.APPLY_GATE,
            )
            if self.correction is not None and self.correction.before_apply is not None:
                self.correction.before_apply()  # a replay going on through Apply
            return self.apply()
        return self.plan()

    def _revert_to_strategize(self, revise: ReviseStrategy) -> Plan:
        """Phase reversion: Execute → Strategize at the strategy decision that was too tight,
        as a correction made by the execution actor (gated by ``delete_content``)."""
        try:
            self.gates.gate(
                AutomationFlag.DELETE_CONTENT,
                f"The execution actor reports: {revise.reason}. Revise the strategy?",
                f"revise:{revise.key}",
            )
        except WaitForApproval:
            return self.update_plan(state=PlanState.AWAITING_APPROVAL)
        return reversion.reverter()(
            self.store,
            reversion.Reversion(
                self.current()[revise.key][0],
                revise.reason,
                requested_by="execution actor",
                options=self.options,
                sandbox_base=None,
            ),
        )

    # -- reconciliation (engine/core/reconcile.py) ---------------------------------------------------

    def _reconciler(self) -> Reconciler:
        return Reconciler(self.sandboxes, self.action.resources, self.plan().attempt)

    def _seal_if_stopped(self, plan: Plan) -> Plan:
        """Stopped in Execute (for a person, a pause, the Apply gate): remember the sandboxes
        as the plan leaves them, so changes made meanwhile by someone else are noticed."""
        if plan.phase is Phase.EXECUTE and not plan.state.is_terminal:
            self._reconciler().seal()
        return plan

    def reconcile(self) -> None:
        """Before going on in Execute or applying: files changed outside the plan since it
        stopped wait for a person — approve keeps them, deny discards them."""
        reconciler = self._reconciler()
        changes = reconciler.outside_changes()
        if not changes:
            return
        key = f"reconcile:{reconcile_fingerprint(changes)}"
        answers = self.gates.answers(ApprovalKind.RECONCILE, key)
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
            raise WaitForApproval(self.gates.ask(ApprovalKind.RECONCILE, key, question))
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

    # -- decisions ------------------------------------------------------------------------

    def _record_root(self) -> None:
        """The plan's prompt_definition, once."""
        if ROOT_KEY in self.current():
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

    def current(self) -> dict[str, tuple[str, str]]:
        """The current decision of each step: step key → (decision id, chosen option)."""
        with self.store.unit_of_work() as uow:
            return uow.decisions.current_steps(self.plan_id)

    def _reasoner(self) -> Reasoner:
        def chosen() -> dict[str, str]:
            return {key: option for key, (_, option) in self.current().items()}

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
            approved=lambda call: self.gates.settled(ApprovalKind.GUARD, call),
            before_call=lambda tool: self.police.check(tool=tool),  # retries' calls too
            spent=self.police.cost_usd,  # guards.max_total_cost counts the model's cost
        )

        def step(state: ActorState, ref: ActorStateRef) -> dict[str, Any]:
            return steps.step(self, reasoner, executor, phase, state, ref)

        # langgraph is imported when a plan first runs, not with this module: the app (and
        # each browser tab of `agents serve`) imports the engine to browse plans, and
        # langgraph with langchain_core is most of that import's time.
        from cleveragents_tui.actors.graphs import Actor

        actor = Actor(saver, self.plan_id, phase, step)
        done = actor.run(self._keep_going)
        state = actor.state() if done and phase is Phase.EXECUTE else None
        if state is not None:
            # a failure no step settled (a correction of its retry re-made no step) is
            # fixed and retried as in a step, with the guidance the correction gave
            FailureHandling(self, executor, steps.fixer(self, reasoner, state)).before_apply()
        return done

    def refresh_seal(self, call: ToolCallRequest, outcome: ToolOutcome) -> None:
        """The plan's own writes are part of the sealed state (even a call that declares no
        writes, such as tests leaving __pycache__ behind)."""
        named = call.arguments.get("resource")
        self._reconciler().refresh([*outcome.writes, *([named] if isinstance(named, str) else [])])

    # -- child plans, sandboxes, apply --------------------------------------------------------

    def ensure_sandboxes(self) -> None:
        """Make the sandboxes of the action's resources that are not made yet: when Execute
        starts, or at the first read of the strategy actor."""
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
        advances the plan (engine/run/apply.py).
        """
        with run_lease.holding(self.sandboxes.base_dir, self.plan_id, "applying", self.store):
            return plan_apply.apply(self)

    def apply_own(self, *, land: bool = True) -> list[str]:
        """Land this plan's sandboxes and mark it applied (engine/run/apply.py)."""
        return plan_apply.apply_own(self, land=land)
