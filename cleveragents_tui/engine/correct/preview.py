"""Previewing a correction: only reads. Returns the :class:`Impact` — the rollback tier, the
affected decisions and child plans (with what each will get), the resources, the irreversible
side effects downstream, the phase change and the warnings — or refuses with the reason and
the options that remain (docs/corrections.md)."""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    DecisionType,
    Phase,
    PlanState,
    SandboxStrategyName,
)
from cleveragents_tui.domain.errors import NotFoundError, UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.impact import affected_decisions_of, affected_subtree
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.reconcile import (
    OutsideChanges,
    Reconciler,
)
from cleveragents_tui.engine.core.rollback import (
    baseline_targets,
    recreate_targets,
    rollback_targets,
)
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.append import plan_append
from cleveragents_tui.engine.correct.guidance import Alternatives, alternatives_for
from cleveragents_tui.engine.correct.later_guidance import LaterGuidance, later_guidance
from cleveragents_tui.engine.correct.later_writers import RemadeDecision, later_writers
from cleveragents_tui.engine.correct.model import (
    ChildAction,
    ChildImpact,
    CorrectionRefusedError,
    Impact,
    IrreversibleEffect,
    Tier,
)
from cleveragents_tui.store import correction_queries
from cleveragents_tui.store.store import Store


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
        return with_warnings(replace(appended, tier=tier))
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
    return with_warnings(impact)


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


def with_warnings(impact: Impact) -> Impact:
    """``impact`` with the warnings its findings call for, worded as the specification words
    them (a pure function: the app's snapshots build impacts with it)."""
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
