"""Correcting a decision: preview the impact, then execute it (ADR-035; DESIGN.md section 5).

``preview`` only reads. It returns an :class:`Impact` — the rollback tier, the affected
decisions and child plans (with what each will get), the resources rollbackable /
non-rollbackable / unaffected, the irreversible side effects downstream, the phase change,
and the warnings worded as the specification words them — or refuses with the reason and
the options that remain.

``execute`` re-checks that the plan has not changed since the preview (its version), takes
the plan (one correction or run at a time), cascades to child plans, rolls resources back
(all or nothing), forks the actor from the decision's LangGraph state with the guidance,
supersedes the affected subtree with a ``user_intervention`` decision, records the
correction attempt, and replays: the plan runs again, with the new attempt's gates.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from pydantic import ValidationError

from cleveragents_tui import failpoints
from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    CorrectionStatus,
    DecisionType,
    Phase,
    PlanState,
    SandboxStrategyName,
)
from cleveragents_tui.domain.errors import ConcurrentChangeError, NotFoundError, UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.rollback import RollbackReport
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core.diff import (
    old_attempt_points,
    record_earlier_replay,
    record_snapshots,
    remember_basis,
)
from cleveragents_tui.engine.core.impact import affected_decisions_of, affected_subtree
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.reasoner_choice import check_plan_model
from cleveragents_tui.engine.core.reconcile import (
    Held,
    OutsideChanges,
    OutsideChoice,
    Reconciler,
    fingerprint,
)
from cleveragents_tui.engine.core.recorder import Correction
from cleveragents_tui.engine.core.rollback import (
    baseline_targets,
    check_targets,
    recreate_targets,
    rollback_targets,
    rollback_to,
)
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.append import AppendPlan, plan_append, start_appended
from cleveragents_tui.engine.correct.guidance import Alternatives, alternatives_for
from cleveragents_tui.engine.correct.later_guidance import LaterGuidance, later_guidance
from cleveragents_tui.engine.correct.later_writers import RemadeDecision, later_writers
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions
from cleveragents_tui.store import correction_queries
from cleveragents_tui.store.store import Store


class Tier(StrEnum):
    FULL = "full decision-level"
    PHASE = "phase-level"
    NONE = "no rollback"


class ChildAction(StrEnum):
    CANCEL = "cancel"
    CANCEL_AND_ROLL_BACK = "cancel and roll back its sandbox"
    REJECT = "reject: already applied"


class CorrectionRefusedError(UserError):
    """The correction cannot be made as asked; nothing was changed."""


class StalePreviewError(UserError):
    """The plan changed after the preview was made."""


@dataclass(frozen=True)
class ChildImpact:
    plan_id: str
    action: str
    phase: Phase
    state: PlanState
    outcome: ChildAction


@dataclass(frozen=True)
class IrreversibleEffect:
    tool: str
    invocations: int
    side_effects: tuple[str, ...]


@dataclass(frozen=True)
class Impact:
    plan_id: str
    plan_version: int
    attempt: int
    decision_id: str
    decision_phase: Phase
    step_key: str | None
    mode: CorrectionMode
    guidance: str
    tier: Tier
    affected_decisions: tuple[str, ...]
    children: tuple[ChildImpact, ...]
    rollbackable: tuple[str, ...]
    non_rollbackable: tuple[str, ...]
    unaffected: tuple[str, ...]
    irreversible: tuple[IrreversibleEffect, ...]
    phase_change: tuple[Phase, Phase] | None
    # current decisions outside the subtree that wrote to a rolled-back resource: re-made
    # (engine/correct/later_writers.py); they and their dependents are in affected_decisions too
    remade: tuple[RemadeDecision, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())
    # the corrected decision's alternatives and the one the replay takes (engine/correct/guidance.py);
    # None for a decision the scripted reasoner did not make
    alternatives: Alternatives | None = None
    # append mode: the appended plan's decisions, sandboxes and landing (engine/correct/append.py)
    append: AppendPlan | None = None
    # phase-level tier: sandboxes without checkpoints (checkpointing off) the revert discards
    # and makes anew from the real resources (engine/core/rollback.py); listed in rollbackable too
    recreated: tuple[str, ...] = field(default=())
    # files changed outside the plan (engine/core/reconcile.py) in sandboxes the revert rolls
    # back: kept (re-applied on top, before the replay) or discarded, as the user chooses
    outside_changes: tuple[OutsideChanges, ...] = field(default=())
    # guidance earlier corrections gave that the restored actor state lacks
    # (engine/correct/later_guidance.py): carried forward when their correction stands, else dropped
    guidance_carried: tuple[LaterGuidance, ...] = field(default=())
    guidance_dropped: tuple[LaterGuidance, ...] = field(default=())

    def rolled_back(self) -> tuple[str, ...]:
        """The resources rolled back, as the preview names them: ``ID (recreated)`` for a
        sandbox made anew."""
        return tuple(f"{r} (recreated)" if r in self.recreated else r for r in self.rollbackable)


@dataclass(frozen=True)
class CorrectionResult:
    correction: CorrectionAttempt
    plan: Plan
    report: RollbackReport | None


# -- preview ----------------------------------------------------------------------------


def preview(
    store: Store,
    decision_ref: str,
    mode: CorrectionMode,
    guidance: str,
    plan_ref: str | None = None,
    choose: int | None = None,
    sandbox_base: Path | None = None,
) -> Impact:
    """What correcting the decision would do. Changes nothing. ``choose``: the alternative
    (1-based) the replay takes, named by the user instead of selected by the guidance;
    ``sandbox_base``: the sandbox folder ``execute`` will use (its RunOptions')."""
    if not guidance.strip():
        raise CorrectionRefusedError(
            "the guidance is empty", 'say what the decision should be: --guidance "..."'
        )
    with store.unit_of_work() as uow:
        decision = uow.decisions.get(uow.decisions.resolve(decision_ref))
        if decision.superseded_by is not None:  # refused below, naming what replaced it
            replaced_by = uow.decisions.replacements(decision.plan_id)[decision.decision_id]
            decision = decision.model_copy(update={"superseded_by": replaced_by})
        if plan_ref is not None and uow.plans.resolve(plan_ref) != decision.plan_id:
            raise CorrectionRefusedError(
                f"decision {decision.decision_id} belongs to plan {decision.plan_id}, not {plan_ref}",
                f"see that plan's decisions with `agents plan tree {plan_ref}`",
            )
        plan = uow.plans.get(decision.plan_id)
        resources = {r.resource_id: r for r in uow.resources.all()}
        used = sorted(
            uow.checkpoints.resources_checkpointed(plan.plan_id, decision_groups_only=False)
        )
        with contextlib.suppress(UserError):  # the resources its action names, used or not
            named = uow.plan_actions.get(plan.plan_id).get("resources", [])
            used += [str(r) for r in named] if isinstance(named, list) else []
    _refuse_if_not_correctable(plan, decision, mode)
    _refuse_if_not_replayable(store, plan)
    found = alternatives_for(store, decision, guidance, choose)
    # The tier the plan's resources allow (ADR-035), named for every correction.
    tier = _tier([resources[r] for r in dict.fromkeys(used) if r in resources])
    if mode is CorrectionMode.APPEND:
        appended = _append_impact(store, plan, decision, guidance, found)
        return _with_warnings(replace(appended, tier=tier))
    warm = OPEN_GRAPHS.holding(decision.plan_id)  # kept by a long-lived process (the app)
    subtree = (
        warm.affected(decision.decision_id)
        if warm
        else affected_subtree(store, decision.decision_id)
    )
    affected = set(subtree.decisions)
    phase_change = None
    if (
        mode is CorrectionMode.REVERT
        and decision.phase is Phase.STRATEGIZE
        and plan.phase is not Phase.STRATEGIZE
    ):
        phase_change = (plan.phase, Phase.STRATEGIZE)
        affected |= _current_execute_decisions(store, plan.plan_id)  # all Execute work goes
    elif mode is CorrectionMode.REVERT and plan.phase is Phase.APPLY:
        phase_change = (plan.phase, decision.phase)
    # Append leaves history untouched: the child plans under the decision go on as they are.
    children = _child_impacts(store, subtree.plans) if mode is CorrectionMode.REVERT else ()
    for child in children:
        if child.outcome is ChildAction.REJECT and mode is CorrectionMode.REVERT:
            raise CorrectionRefusedError(
                f"child plan {child.plan_id} ({child.action}) spawned under this decision is already applied: "
                "its changes cannot be reverted by its parent",
                f"correct the child plan independently, or use --mode=append on {decision.decision_id}",
            )
    remade: tuple[RemadeDecision, ...] = ()
    recreated: tuple[str, ...] = ()
    rollbackable: tuple[str, ...] = ()
    non_rollbackable: tuple[str, ...] = ()
    outside: tuple[OutsideChanges, ...] = ()
    calls: _Calls | None = None  # of the affected decisions, read once
    if mode is CorrectionMode.REVERT and plan.phase is not Phase.STRATEGIZE:
        sandboxes = PlanSandboxes(store, plan.plan_id, sandbox_base)
        if decision.phase is Phase.EXECUTE:
            if tier is not Tier.FULL:
                raise CorrectionRefusedError(*_tier_error(decision, tier))
            targets, marked = rollback_targets(sandboxes, decision.decision_id)
        else:  # all Execute work goes: baselines, and sandboxes without checkpoints made anew
            targets, marked = baseline_targets(sandboxes)
            made_anew, shared = recreate_targets(sandboxes)
            recreated, marked = tuple(made_anew), [*marked, *shared]
        remade, followers = later_writers(
            store,
            decision,
            targets,
            affected,
            lambda ds: (
                set().union(*(warm.affected(d).decisions for d in ds))
                if warm
                else affected_decisions_of(store, ds)
            ),
        )
        affected |= {r.decision_id for r in remade} | followers
        calls = _calls_of(store, affected)
        written_later = _none_resources_written(calls[0], resources)
        rollbackable = tuple(sorted({*targets, *recreated}))
        non_rollbackable = tuple(sorted(set(marked) | written_later))
        outside = _outside_changes(sandboxes, plan.attempt, rollbackable)
    carried, dropped = (
        later_guidance(store, decision, phase_change, affected)
        if mode is CorrectionMode.REVERT
        else ((), ())
    )
    touched = set(rollbackable) | set(non_rollbackable)
    unaffected = tuple(sorted(r for r in dict.fromkeys(used) if r not in touched))
    irreversible = (
        _irreversible((calls or _calls_of(store, affected))[1])
        if mode is CorrectionMode.REVERT
        else ()
    )
    impact = Impact(
        plan_id=plan.plan_id,
        plan_version=plan.version,
        attempt=plan.attempt,
        decision_id=decision.decision_id,
        decision_phase=decision.phase,
        step_key=decision.step_key,
        mode=mode,
        guidance=guidance,
        tier=tier,
        affected_decisions=tuple(sorted(affected)),
        remade=remade,
        children=children,
        rollbackable=rollbackable,
        non_rollbackable=non_rollbackable,
        unaffected=unaffected,
        irreversible=irreversible,
        phase_change=phase_change,
        alternatives=found,
        recreated=recreated,
        outside_changes=outside,
        guidance_carried=carried,
        guidance_dropped=dropped,
    )
    return _with_warnings(impact)


def _outside_changes(
    sandboxes: PlanSandboxes, attempt: int, resource_ids: tuple[str, ...]
) -> tuple[OutsideChanges, ...]:
    """Files changed outside the plan, since it last stopped, in the sandboxes a revert rolls
    back (engine/core/reconcile.py; only reads)."""
    return tuple(Reconciler(sandboxes, resource_ids, attempt).outside_changes())


def _append_impact(
    store: Store, plan: Plan, decision: Decision, guidance: str, found: Alternatives | None
) -> Impact:
    """An append supersedes nothing, cancels nothing, rolls nothing back: its impact is the
    appended plan (engine/correct/append.py) and the irreversible effects its work repeats."""
    if plan.phase is Phase.STRATEGIZE:
        raise CorrectionRefusedError(
            f"plan {plan.plan_id} is still in Strategize: nothing has run that a corrective "
            "plan could build on",
            f'correct the decision itself: agents plan correct {decision.decision_id} --mode=revert --guidance "..."',
        )
    appended = plan_append(store, plan, decision, guidance, found.option if found else None)
    counts = Counter(c.tool for c in appended.irreversible_calls)
    effects = {c.tool: c.side_effects for c in appended.irreversible_calls}
    return Impact(
        plan_id=plan.plan_id,
        plan_version=plan.version,
        attempt=plan.attempt,
        decision_id=decision.decision_id,
        decision_phase=decision.phase,
        step_key=decision.step_key,
        mode=CorrectionMode.APPEND,
        guidance=guidance,
        tier=Tier.FULL,
        affected_decisions=(),
        children=(),
        rollbackable=(),
        non_rollbackable=(),
        unaffected=(),
        irreversible=tuple(IrreversibleEffect(t, n, effects[t]) for t, n in sorted(counts.items())),
        phase_change=None,
        alternatives=found,
        append=appended,
    )


def _refuse_if_not_correctable(plan: Plan, decision: Decision, mode: CorrectionMode) -> None:
    if decision.superseded_by is not None:
        raise CorrectionRefusedError(
            f"decision {decision.decision_id} was already superseded by {decision.superseded_by}",
            "correct the current decision that replaced it",
        )
    if decision.decision_type is DecisionType.PROMPT_DEFINITION and mode is CorrectionMode.REVERT:
        raise CorrectionRefusedError(
            "the prompt_definition is the plan itself and cannot be reverted",
            "start a new plan with `agents plan use`, or use --mode=append",
        )
    if plan.state is PlanState.CANCELLED:
        raise CorrectionRefusedError(
            f"plan {plan.plan_id} is cancelled: a cancelled plan cannot be corrected",
            "start a new plan of its action with `agents plan use ACTION`",
        )
    if plan.state is PlanState.APPLIED and mode is CorrectionMode.REVERT:
        raise CorrectionRefusedError(
            f"plan {plan.plan_id} is applied: applied changes cannot be reverted",
            f"use --mode=append to add a corrective plan: agents plan correct {decision.decision_id} "
            '--mode=append --guidance "..."',
        )
    if (
        plan.phase is Phase.APPLY
        and plan.state not in (PlanState.CONSTRAINED, PlanState.ERRORED)
        and mode is CorrectionMode.REVERT
        and plan.state is not PlanState.APPLIED
    ):
        raise CorrectionRefusedError(
            f"plan {plan.plan_id} is applying right now", "wait for Apply to finish"
        )


def replay_blocker(store: Store, plan_id: str) -> tuple[str, str] | None:
    """Why the plan cannot be run again, as (problem, fix), or None when it can.

    Every correction ends in a run (a revert replays the plan, an append runs a child plan
    of the same action), so a plan that cannot run cannot be corrected at all: this is asked
    before anything changes. It loads what :class:`PlanRunner` loads to start: the stored
    action (a recorded sample loaded by `agents demo-data` has none) and the profile.
    """
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        try:
            definition = uow.plan_actions.get(plan_id)
        except UserError:
            return (
                f"plan {plan_id} cannot be corrected: it has no stored action to replay (a "
                "recorded sample, as `agents demo-data` loads, or a plan not started with "
                "`agents plan use`), so neither a revert nor an append can run",
                "try corrections on a plan that runs: `agents demo` builds one, or start a plan "
                "with `agents plan use ACTION`",
            )
    try:
        Action.model_validate(definition)
        ProfileRegistry(store).get(plan.automation_profile)
    except (UserError, ValidationError) as exc:
        problem = exc.problem if isinstance(exc, UserError) else f"{exc.error_count()} error(s)"
        return (
            f"plan {plan_id} cannot be corrected: it cannot be run again ({problem})",
            "start a new plan with `agents plan use ACTION`",
        )
    return None


def _refuse_if_not_replayable(store: Store, plan: Plan) -> None:
    blocker = replay_blocker(store, plan.plan_id)
    if blocker is not None:
        raise CorrectionRefusedError(*blocker)


def _tier(items: list[Resource]) -> Tier:
    if not items:
        return Tier.FULL
    if all(
        r.sandbox_strategy is SandboxStrategyName.NONE and not r.checkpoint_enabled for r in items
    ):
        return Tier.NONE
    if any(
        r.sandbox_strategy is not SandboxStrategyName.NONE and not r.checkpoint_enabled
        for r in items
    ):
        return Tier.PHASE
    return Tier.FULL


def _tier_error(decision: Decision, tier: Tier) -> tuple[str, str]:
    """Worded like ADR-035's example, listing the options available."""
    d = decision.decision_id
    if tier is Tier.NONE:
        return (
            f"Decision {d} was made during Execute, but no resource of this plan can be rolled back "
            "(sandbox strategy none, checkpointing disabled)",
            f'available options: append a correction: agents plan correct {d} --mode=append --guidance "..."',
        )
    return (
        f"Decision {d} was made during Execute, but checkpointing is disabled for this plan. "
        "Fine-grained rollback is not available",
        "available options: revert to Strategize: agents plan correct <strategize_decision_id> --mode=revert; "
        f'append a correction: agents plan correct {d} --mode=append --guidance "..."; '
        "re-run with checkpointing: agents config set sandbox.checkpoint.enabled true "
        "--resource RESOURCE, then agents plan use ACTION again",
    )


# What the tool calls of the affected decisions name: the resources they name, and the
# (tool, side effects) of the irreversible ones, by decision id, then in the order made.
_Calls = tuple[set[str], list[tuple[str, tuple[str, ...]]]]


def _calls_of(store: Store, affected: set[str]) -> _Calls:
    """One read transaction, a statement for each, however many decisions are affected."""
    with store.unit_of_work() as uow:
        named = uow.run(correction_queries.resources_named, affected)
        return named, uow.run(correction_queries.irreversible_calls, affected)


def _none_resources_written(named: set[str], resources: dict[str, Resource]) -> set[str]:
    """``none`` resources that tool calls of the affected decisions wrote: no checkpoint holds
    their state, so what those calls did persists."""
    return {
        r
        for r in named
        if r in resources and resources[r].sandbox_strategy is SandboxStrategyName.NONE
    }


def _current_execute_decisions(store: Store, plan_id: str) -> set[str]:
    with store.unit_of_work() as uow:
        return uow.run(correction_queries.current_decision_ids, plan_id, Phase.EXECUTE.value)


def _child_impacts(store: Store, child_ids: frozenset[str]) -> tuple[ChildImpact, ...]:
    """What a revert does to each child plan under the decision, by plan id (one read)."""
    if not child_ids:
        return ()
    with store.unit_of_work() as uow:
        found = uow.run(correction_queries.plans, child_ids)
    impacts = []
    for child_id in sorted(child_ids):
        child = found.get(child_id)
        if child is None:  # as uow.plans.get says it
            raise NotFoundError(
                f"plan {child_id} does not exist", "list plans with `agents plan list`"
            )
        if child.state is PlanState.APPLIED:
            outcome = ChildAction.REJECT
        elif child.state is PlanState.CREATED:
            outcome = ChildAction.CANCEL
        else:
            outcome = ChildAction.CANCEL_AND_ROLL_BACK
        impacts.append(ChildImpact(child.plan_id, child.action, child.phase, child.state, outcome))
    return tuple(impacts)


def _irreversible(calls: list[tuple[str, tuple[str, ...]]]) -> tuple[IrreversibleEffect, ...]:
    counts: Counter[str] = Counter()
    effects: dict[str, tuple[str, ...]] = {}
    for tool, side_effects in calls:  # the last one's effects are named
        counts[tool] += 1
        effects[tool] = side_effects
    return tuple(IrreversibleEffect(t, n, effects[t]) for t, n in sorted(counts.items()))


def _predicted(impact: Impact) -> bool:
    """An append whose work is known (the scripted reasoner's), not left to the actor."""
    return impact.append is not None and impact.append.predicted


def _with_warnings(impact: Impact) -> Impact:
    warnings = []
    if impact.non_rollbackable:
        listed = "\n".join(f"  - {r}" for r in impact.non_rollbackable)
        warnings.append(
            "WARNING: The following resources cannot be rolled back (sandbox strategy: none):\n"
            f"{listed}\n\nResource changes since this decision will persist.\n"
            "Proceed with rollback of other resources?"
        )
    if impact.irreversible:
        listed = "\n".join(
            f"  - {e.tool} ({e.invocations} invocation{'s' if e.invocations != 1 else ''})"
            + (f" — {', '.join(e.side_effects)}" if e.side_effects else "")
            for e in impact.irreversible
        )
        warnings.append(
            f"WARNING: The appended plan {'repeats' if _predicted(impact) else 'may repeat'} work that triggers\n"
            f"irreversible external effects:\n{listed}\n\n"
            "They happen again, and cannot be undone.\nProceed?"
            if impact.mode is CorrectionMode.APPEND
            else "WARNING: Rolling back past this decision undoes work that triggered\n"
            f"irreversible external effects:\n{listed}\n\n"
            "Sandbox resources can be rolled back, but external effects cannot be undone.\nProceed?"
        )
    cancelled = [c for c in impact.children if c.outcome is not ChildAction.REJECT]
    if cancelled:
        listed = "\n".join(
            f"  - {c.plan_id} {c.action} ({c.state.value}): {c.outcome.value}" for c in cancelled
        )
        warnings.append(f"WARNING: These child plans will be cancelled:\n{listed}\nProceed?")
    if impact.guidance_dropped:
        listed = "\n".join(f"  - {guidance_line(g)}" for g in impact.guidance_dropped)
        warnings.append(
            "WARNING: This revert drops guidance that earlier corrections gave to later\n"
            f"decisions (it supersedes those corrections):\n{listed}\n\n"
            "The replay makes those decisions again without it.\nProceed?"
        )
    return Impact(**{**impact.__dict__, "warnings": tuple(warnings)})


def guidance_line(guidance: LaterGuidance) -> str:
    """``'run only the unit test' (step test, correction 01J…)`` for previews and warnings."""
    step = "every step" if guidance.key == "*" else f"step {guidance.key}"
    source = f", correction {guidance.decision_id}" if guidance.decision_id else ""
    return f"{guidance.text!r} ({step}{source})"


def outside_refusal(impact: Impact) -> CorrectionRefusedError:
    """Refuses a revert that would roll back files changed outside the plan while no one
    said to keep or discard them (``--yes`` confirms warnings, it never chooses this)."""
    count = sum(len(c.paths) for c in impact.outside_changes)
    where = "; ".join(c.summary() for c in impact.outside_changes)
    return CorrectionRefusedError(
        f"the revert would roll back {count} file(s) changed outside the plan ({where})",
        "keep them on top of the rolled-back state with --outside-changes=keep, or discard "
        "them with --outside-changes=discard",
    )


# -- execute ----------------------------------------------------------------------------


def execute(
    store: Store,
    impact: Impact,
    *,
    acknowledged: bool,
    requested_by: str,
    options: RunOptions | None = None,
    outside: OutsideChoice | None = None,
) -> CorrectionResult:
    """Carry out a previewed correction. Warnings must have been acknowledged, and files
    changed outside the plan that the revert rolls back must be kept or discarded
    (``outside``)."""
    if impact.warnings and not acknowledged:
        raise CorrectionRefusedError(
            f"this correction has {len(impact.warnings)} warning(s) to confirm",
            "confirm them, or pass --yes",
        )
    if impact.outside_changes and outside is None:
        raise outside_refusal(impact)
    options = options or RunOptions()
    if options.reasoner_factory is None:  # the replay asks the plan's model: ready?
        check_plan_model(store, impact.plan_id, replay=True)
    # Held from before the plan is taken to the end of the replay, so a runner in another
    # process never advances the plan under the correction (nor the correction under it).
    with run_lease.holding(options.sandbox_base, impact.plan_id, "correcting", store):
        return _execute(store, impact, requested_by, options, outside)


def _execute(
    store: Store,
    impact: Impact,
    requested_by: str,
    options: RunOptions,
    outside: OutsideChoice | None,
) -> CorrectionResult:
    sandboxes = PlanSandboxes(store, impact.plan_id, options.sandbox_base)
    planned = _revert_targets(store, impact, sandboxes)
    if planned is not None:  # refused here, before the plan is taken, if one cannot be reached
        check_targets(sandboxes, impact.decision_id, planned[0], impact.recreated)
    reconciler = Reconciler(sandboxes, impact.rollbackable, impact.attempt)
    if planned is not None and fingerprint(reconciler.outside_changes()) != fingerprint(
        impact.outside_changes
    ):
        raise StalePreviewError(
            f"files in the sandboxes of plan {impact.plan_id} changed outside the plan since "
            "the preview",
            "preview the correction again",
        )
    correction = _take_plan(store, impact, requested_by)
    try:
        for child in impact.children:
            if child.outcome is not ChildAction.REJECT:  # an applied child stays applied
                _cancel_child(store, child, options)
        if impact.mode is CorrectionMode.APPEND:
            return _append(store, impact, correction, options)
        held = _outside_found(store, impact, reconciler, outside)
        return _revert(store, impact, correction, options, sandboxes, planned, (outside, held))
    except BaseException as exc:
        if _reload(store, correction).status is CorrectionStatus.RUNNING:  # ended unrecorded
            _finish(
                store,
                correction,
                CorrectionStatus.FAILED,
                report={"error": str(exc)},
                plan_state=PlanState.ERRORED,
            )
        raise


def _take_plan(store: Store, impact: Impact, requested_by: str) -> CorrectionAttempt:
    """The database decides who corrects: the plan row is locked (PostgreSQL: FOR UPDATE
    NOWAIT; SQLite: the write lock of BEGIN IMMEDIATE), its version must be the preview's,
    and no other correction may be running."""
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.lock(impact.plan_id)
        running = uow.corrections.running(plan.plan_id)
        replaying = _REPLAYING.get()
        if running is not None and replaying and running.correction_id == replaying.correction_id:
            uow.corrections.finish(  # its replay reached this correction: it is done
                running.correction_id,
                CorrectionStatus.SUCCEEDED,
                report=replaying.report,
                replacement=replaying.replacement,
            )
            uow.events.append(
                "correction_finished",
                {"correction_id": running.correction_id, "status": "succeeded"},
                plan_id=plan.plan_id,
                actor=running.requested_by,
            )
        elif running is not None:
            raise ConcurrentChangeError(
                f"plan {plan.plan_id} is busy: correction {running.correction_id} is running",
                "wait for it to finish, then preview again",
            )
        if plan.phase is Phase.APPLY and plan.state is PlanState.RUNNING:
            raise ConcurrentChangeError(
                f"plan {plan.plan_id} is busy: it is being applied",
                "wait for the Apply to finish; an applied plan takes --mode=append corrections",
            )
        if plan.version != impact.plan_version:
            raise StalePreviewError(
                f"plan {plan.plan_id} changed since the preview (version {impact.plan_version} → {plan.version})",
                "preview the correction again",
            )
        attempt = plan.attempt + 1
        correction = CorrectionAttempt(
            plan_id=plan.plan_id,
            target_decision_id=impact.decision_id,
            mode=impact.mode,
            guidance=impact.guidance,
            attempt=attempt,
            requested_by=requested_by,
        )
        uow.corrections.add(correction)
        uow.plans.save(plan.model_copy(update={"attempt": attempt, "updated_at": utc_now()}))
        uow.run(  # gates of the old attempt lapse
            correction_queries.lapse_pending_approvals,
            plan.plan_id,
            "correction",
            f"superseded by correction {correction.correction_id}",
        )
        uow.events.append(
            "correction_started",
            {"correction_id": correction.correction_id, "mode": impact.mode.value},
            plan_id=plan.plan_id,
            actor=requested_by,
        )
        uow.commit()
    return correction


def _cancel_child(store: Store, child: ChildImpact, options: RunOptions) -> None:
    if child.outcome is ChildAction.CANCEL_AND_ROLL_BACK:
        sandboxes = PlanSandboxes(store, child.plan_id, options.sandbox_base)
        targets, marked = baseline_targets(sandboxes)
        report = rollback_to(sandboxes, f"baseline of {child.plan_id}", targets, marked)
        if not report.succeeded:
            raise CorrectionRefusedError(
                f"child plan {child.plan_id} could not be rolled back", "run `agents doctor`"
            )
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(child.plan_id)
        uow.plans.save(
            plan.model_copy(update={"state": PlanState.CANCELLED, "updated_at": utc_now()})
        )
        uow.events.append("plan_cancelled", {"reason": "parent corrected"}, plan_id=child.plan_id)
        uow.commit()


def _revert_targets(
    store: Store, impact: Impact, sandboxes: PlanSandboxes
) -> tuple[dict[str, CheckpointMetadata], list[str]] | None:
    """What a revert rolls back (resource -> checkpoint, and the resources it cannot), or
    None when it rolls back no resource (an append, a plan still in Strategize)."""
    if impact.mode is not CorrectionMode.REVERT:
        return None
    if not (impact.rollbackable or impact.non_rollbackable):
        return None
    with store.unit_of_work() as uow:
        target = uow.decisions.get(impact.decision_id)
        plan = uow.plans.get(impact.plan_id)
    if plan.phase is Phase.STRATEGIZE:
        return None
    if target.phase is Phase.EXECUTE:
        return rollback_targets(sandboxes, target.decision_id)
    return baseline_targets(sandboxes)


def _revert(
    store: Store,
    impact: Impact,
    correction: CorrectionAttempt,
    options: RunOptions,
    sandboxes: PlanSandboxes,
    planned: tuple[dict[str, CheckpointMetadata], list[str]] | None,
    outside: tuple[OutsideChoice | None, Held | None] = (None, None),
) -> CorrectionResult:
    """``planned``: what ``_revert_targets`` found before the plan was taken (the preview's
    plan version, checked when it was taken, vouches that it still holds); ``outside``:
    what to do with the files changed outside the plan, and those copied aside to keep."""
    report: RollbackReport | None = None
    targets: dict[str, CheckpointMetadata] = {}
    with store.unit_of_work() as uow:
        target = uow.decisions.get(impact.decision_id)
    # an earlier revert's replay that has not ended ends here, where it stopped
    record_earlier_replay(store, impact.plan_id, options.sandbox_base)
    points: dict[str, str] | None = None  # the old attempt's, for the diff (engine/core/diff.py)
    if planned is not None:
        targets, marked = planned
        points = old_attempt_points(store, target.decision_id, targets)
        report = rollback_to(sandboxes, target.decision_id, targets, marked, impact.recreated)
        if not report.succeeded:  # every resource was put back, outside changes too
            if outside[1] is not None:
                outside[1].drop()
            _finish(
                store,
                correction,
                CorrectionStatus.FAILED,
                report=report.model_dump(mode="json"),
                plan_state=PlanState.ERRORED,
            )
            return CorrectionResult(
                _reload(store, correction), _plan(store, impact.plan_id), report
            )
        _outside_answered(store, impact, correction, *outside)
    guidance = _carry_forward(store, impact, correction, target, report, (targets, points))
    recorded = _Replaying(
        correction.correction_id,
        guidance.decision_id,
        report.model_dump(mode="json") if report else {},
    )

    def snapshot() -> None:  # the state the replay stopped in: the new attempt's side
        record_snapshots(store, correction.correction_id, options.sandbox_base)

    replay = Correction(impact.decision_id, impact.guidance, before_apply=snapshot)
    token = _REPLAYING.set(recorded)
    try:
        replayed = PlanRunner(store, impact.plan_id, options, correction=replay).run()
    except Exception as exc:  # the correction is made, its replay is not: say so
        if _reload(store, correction).status is not CorrectionStatus.RUNNING:
            raise  # a correction the replay started took over, and failed
        _finish(
            store,
            correction,
            CorrectionStatus.FAILED,
            report={**recorded.report, "error": f"its replay failed: {exc}", "replay": "failed"},
            replacement=guidance.decision_id,
            plan_state=PlanState.ERRORED,
        )
        replayed = _plan(store, impact.plan_id)
    else:
        _finish_replayed(store, correction, recorded)
    finally:  # after the outcome is recorded: what fails here does not change it
        _REPLAYING.reset(token)
        snapshot()  # nothing more if an automatic Apply took it already (final)
    return CorrectionResult(_reload(store, correction), replayed, report)


def _outside_found(
    store: Store, impact: Impact, reconciler: Reconciler, outside: OutsideChoice | None
) -> Held | None:
    """A revert's reconciliation starts as the runner's does (docs/reconciliation.md): the
    event ``sandbox_changed_outside``; files to keep are copied aside before the rollback."""
    if not impact.outside_changes:
        return None
    _progress(
        store,
        impact.plan_id,
        "sandbox_changed_outside",
        {
            "changes": [c.summary() for c in impact.outside_changes],
            "count": sum(len(c.paths) for c in impact.outside_changes),
        },
    )
    return reconciler.hold(impact.outside_changes) if outside is OutsideChoice.KEEP else None


def _outside_answered(
    store: Store,
    impact: Impact,
    correction: CorrectionAttempt,
    outside: OutsideChoice | None,
    held: Held | None,
) -> None:
    """After the rollback, before the replay: kept files are put back on top of the
    rolled-back state (the replay starts from them, and its checkpoints record them);
    discarded ones went with the rollback (its safety checkpoint still holds them)."""
    if not impact.outside_changes:
        return
    if held is not None:
        try:
            held.reapply()
        except OSError as exc:
            raise CorrectionIncompleteError(
                f"the resources were rolled back, but the files changed outside the plan could "
                f"not be put back on top ({exc}); they are kept in {held.copies}"
            ) from exc
        held.drop()
    kept = outside is OutsideChoice.KEEP
    _progress(
        store,
        impact.plan_id,
        "outside_changes_kept" if kept else "outside_changes_discarded",
        {"changes": [c.summary() for c in impact.outside_changes], "by": correction.requested_by},
    )


@dataclass(frozen=True)
class _Replaying:
    """A revert whose replay is running in this thread: what its success records."""

    correction_id: str
    replacement: str
    report: dict[str, object]


# Set while a revert's replay runs in this context. A phase reversion during the replay
# starts a correction of its own (PlanRunner._revert_to_strategize): the replay got as far
# as a gate the execution actor raised, so _take_plan finishes this one then.
_REPLAYING: ContextVar[_Replaying | None] = ContextVar("replaying_correction", default=None)


def _finish_replayed(store: Store, correction: CorrectionAttempt, done: _Replaying) -> None:
    """Record the success once the replay stopped where a run stops (a gate, a pause, the
    end): a commit that fails is tried again, like every step past the rollback."""
    problem: Exception | None = None
    for _ in range(FORWARD_ATTEMPTS):
        if _reload(store, correction).status is not CorrectionStatus.RUNNING:
            return  # finished when a correction its replay started took the plan
        try:
            _finish(
                store,
                correction,
                CorrectionStatus.SUCCEEDED,
                replacement=done.replacement,
                report={**_reload(store, correction).report, **done.report},  # kept: snapshots
            )
            return
        except Exception as exc:
            problem = exc
    raise CorrectionIncompleteError(
        f"the correction was replayed, but recording it failed {FORWARD_ATTEMPTS} times: "
        f"{problem}; run `agents doctor`"
    ) from problem


FORWARD_ATTEMPTS = 3


class CorrectionIncompleteError(RuntimeError):
    """The resources were rolled back but the correction could not be completed."""


def _carry_forward(
    store: Store,
    impact: Impact,
    correction: CorrectionAttempt,
    target: Decision,
    report: RollbackReport | None,
    rolled: tuple[dict[str, CheckpointMetadata], dict[str, str] | None],
) -> Decision:
    """Everything after the resources are rolled back, up to the replay: keep the basis of
    the correction's diff (``rolled``: the rollback's targets and the old attempt's points),
    forget the savepoints the rollback destroyed, restore the reasoning, supersede, and set
    the plan running again (the correction stays running until its replay has stopped: a
    replay that fails must not leave it recorded as succeeded). Returns the guidance decision.

    There is no way back from here: ``ROLLBACK TO SAVEPOINT`` cannot be undone, so a
    database rolled back cannot be put back as it was. The correction is carried forward
    instead: every step is idempotent, and one that fails (a database commit, the LangGraph
    saver) is tried again, up to :data:`FORWARD_ATTEMPTS` times in all.
    """
    targets, points = rolled
    problem: Exception | None = None
    for _ in range(FORWARD_ATTEMPTS):
        try:
            # what any process that goes on with the replay needs to record its diff
            remember_basis(store, correction.correction_id, report, points)
            if report is not None:
                _forget_destroyed_savepoints(store, impact.plan_id, targets)
                _progress(
                    store,
                    impact.plan_id,
                    "resources_rolled_back",
                    {
                        "resources": [
                            f"{r.resource_id}: {r.outcome.value}" for r in report.resources
                        ]
                    },
                )
            _reasoning_rollback(store, target, impact)
            guidance = _supersede(store, target, impact)
            _progress(
                store,
                impact.plan_id,
                "decisions_superseded",
                {"count": len(impact.affected_decisions), "replacement": guidance.decision_id},
            )
            phase = target.phase if impact.phase_change else None
            _set_plan(store, impact.plan_id, PlanState.RUNNING, phase)
            return guidance
        except Exception as exc:
            problem = exc
    raise CorrectionIncompleteError(
        f"the resources were rolled back to decision {target.decision_id}, but completing the "
        f"correction failed {FORWARD_ATTEMPTS} times: {problem}; correct the decision again, "
        "or run `agents doctor`"
    ) from problem


def _progress(store: Store, plan_id: str, kind: str, payload: dict[str, object]) -> None:
    """A step of a running correction, as an event: the app's replay view and every other
    process watching the store show it as it happens."""
    with store.unit_of_work(write=True) as uow:
        uow.events.append(kind, payload, plan_id=plan_id)
        uow.commit()


def _forget_destroyed_savepoints(
    store: Store, plan_id: str, targets: dict[str, CheckpointMetadata]
) -> None:
    """``ROLLBACK TO SAVEPOINT`` destroys every later savepoint: mark their rows pruned, so
    nothing (doctor, a later correction) takes them for live checkpoints. Git and directory
    checkpoints stay: they hold the old attempt for diffs."""
    savepoints = {
        resource_id: target
        for resource_id, target in targets.items()
        if target.strategy is SandboxStrategyName.TRANSACTION_ROLLBACK
    }
    if not savepoints:
        return
    with store.unit_of_work(write=True) as uow:
        everything = uow.checkpoints.for_plan(plan_id)
        gone: list[str] = []
        for resource_id, target in savepoints.items():
            rows = [r for r in everything if r.resource_id == resource_id]
            later = rows[[r.checkpoint_id for r in rows].index(target.checkpoint_id) + 1 :]
            gone += [r.checkpoint_id for r in later if r.pruned_at is None]
        uow.run(correction_queries.mark_pruned, gone)
        uow.commit()


def _reasoning_rollback(store: Store, target: Decision, impact: Impact) -> None:
    """Fork the actor from the LangGraph state the decision was made from, with the guidance.
    A Strategize decision corrected during Execute also resets the execution actor. The
    guidance of earlier corrections that stand goes back in first (engine/correct/later_guidance.py),
    so the decisions the replay re-makes still follow it."""
    from cleveragents_tui.actors.checkpointer import open_checkpointer  # see runner._run_actor
    from cleveragents_tui.actors.graphs import Actor

    def carried(phase: Phase) -> list[dict[str, str]]:
        return [g.entry for g in impact.guidance_carried if g.phase is phase]

    ref = target.context_snapshot.actor_state_ref
    with open_checkpointer(store.engine.url) as saver:
        if ref is not None:
            actor = Actor(saver, impact.plan_id, target.phase, lambda state, r: {})
            state = actor.load(ref)
            entry = _guidance_entry(target.step_key or "*", impact)
            actor.fork(ref, {"guidance": [*state["guidance"], *carried(target.phase), entry]})
        if impact.phase_change and impact.phase_change[1] is Phase.STRATEGIZE:
            execution = Actor(saver, impact.plan_id, Phase.EXECUTE, lambda state, r: {})
            first = execution.first_checkpoint()
            if first is not None:
                entry = {"key": "*", "text": impact.guidance}
                execution.fork(first, {"guidance": [*carried(Phase.EXECUTE), entry]})


def _guidance_entry(key: str, impact: Impact) -> dict[str, str]:
    """The guidance for the actor, with the alternative the preview said the replay takes
    pinned (``choose``), so the scripted reasoner takes exactly that one."""
    entry = {"key": key, "text": impact.guidance}
    option = impact.alternatives.option if impact.alternatives else None
    return entry if option is None else {**entry, "choose": option}


def _supersede(store: Store, target: Decision, impact: Impact) -> Decision:
    """Record the guidance and mark the affected decisions; when an earlier try already did
    (its commit went through), return what it recorded."""
    with store.unit_of_work() as uow:
        now = uow.decisions.get(target.decision_id)
        if now.superseded_by is not None:
            return uow.decisions.get(now.superseded_by)
    with store.unit_of_work(write=True) as uow:
        sequence = uow.decisions.next_sequence_number(impact.plan_id)
        guidance = Decision(
            plan_id=impact.plan_id,
            parent_decision_id=target.parent_decision_id or target.decision_id,
            sequence_number=sequence,
            decision_type=DecisionType.USER_INTERVENTION,
            phase=target.phase,
            question=f"Correction of: {target.question}",
            chosen_option=impact.guidance,
            alternatives_considered=(target.chosen_option,),
            is_correction=True,
            corrects_decision_id=target.decision_id,
            correction_reason=impact.guidance,
            step_key=f"correction:{target.step_key or target.decision_id}",
        )
        uow.decisions.add(guidance)
        uow.flush()
        superseded = uow.run(
            correction_queries.current_among, impact.plan_id, impact.affected_decisions
        )
        uow.run(correction_queries.supersede, superseded, by=guidance.decision_id)
        failpoints.hit("correction.supersede")
        uow.commit()
    OPEN_GRAPHS.recorded(guidance)
    OPEN_GRAPHS.superseded(superseded)
    return guidance


def _append(
    store: Store, impact: Impact, correction: CorrectionAttempt, options: RunOptions
) -> CorrectionResult:
    """History untouched: a corrective child plan runs only the corrective work, on top of
    the plan's current state (engine/correct/append.py). Then a plan that was waiting in Execute
    goes on, as after a revert, to its new attempt's gates (the old attempt's lapsed); any
    other plan stays as it is (an applied one: the appended plan lands on its own)."""
    with store.unit_of_work() as uow:
        target = uow.decisions.get(impact.decision_id)
    chosen = impact.alternatives.option if impact.alternatives else None
    child = start_appended(store, impact.plan_id, target, impact.guidance, chosen, options)
    _finish(store, correction, CorrectionStatus.SUCCEEDED, appended=child.plan_id, report={})
    plan = _plan(store, impact.plan_id)
    waiting = (PlanState.AWAITING_APPROVAL, PlanState.COMPLETED)
    if plan.phase is Phase.EXECUTE and plan.state in waiting:
        plan = PlanRunner(store, impact.plan_id, options).run()
    return CorrectionResult(_reload(store, correction), plan, None)


def _finish(
    store: Store,
    correction: CorrectionAttempt,
    status: CorrectionStatus,
    *,
    report: dict[str, object],
    replacement: str | None = None,
    appended: str | None = None,
    plan_state: PlanState | None = None,
    phase: Phase | None = None,
) -> None:
    with store.unit_of_work(write=True) as uow:
        uow.corrections.finish(
            correction.correction_id,
            status,
            report=report,
            replacement=replacement,
            appended=appended,
        )
        if plan_state is not None or phase is not None:
            plan = uow.plans.get(correction.plan_id)
            changes: dict[str, object] = {"updated_at": utc_now()}
            if plan_state is not None:
                changes["state"] = plan_state
            if phase is not None:
                changes["phase"] = phase
            uow.plans.save(plan.model_copy(update=changes))
        uow.events.append(
            "correction_finished",
            {"correction_id": correction.correction_id, "status": status.value},
            plan_id=correction.plan_id,
            actor=correction.requested_by,  # other tabs' status lines say who corrected
        )
        failpoints.hit("correction.finish", status.value)
        uow.commit()


def _set_plan(store: Store, plan_id: str, state: PlanState, phase: Phase | None) -> None:
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(plan_id)
        changes: dict[str, object] = {"state": state, "updated_at": utc_now()}
        if phase is not None:
            changes["phase"] = phase
        uow.plans.save(plan.model_copy(update=changes))
        uow.commit()


def _reload(store: Store, correction: CorrectionAttempt) -> CorrectionAttempt:
    with store.unit_of_work() as uow:
        return uow.corrections.get(correction.correction_id)


def _plan(store: Store, plan_id: str) -> Plan:
    with store.unit_of_work() as uow:
        return uow.plans.get(plan_id)
