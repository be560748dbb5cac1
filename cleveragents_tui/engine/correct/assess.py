"""The impact of a correction, worked out from a snapshot of its plan
(engine/correct/snapshot.py): pure functions — no store, no files — so what a preview says is
a function of what was read, testable on any snapshot (tests/engine/test_correction_assess.py).
What each part means: docs/corrections.md."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    DecisionType,
    Phase,
    PlanState,
    SandboxStrategyName,
)
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.rollback import baselines_from, targets_from, unchecked_from
from cleveragents_tui.engine.correct.guidance import Alternatives, alternatives
from cleveragents_tui.engine.correct.later_guidance import LaterGuidance, later_guidance
from cleveragents_tui.engine.correct.later_writers import RemadeDecision, remade_from
from cleveragents_tui.engine.correct.model import (
    ChildAction,
    ChildImpact,
    CorrectionRefusedError,
    Impact,
    IrreversibleEffect,
    Tier,
    copied,
)
from cleveragents_tui.engine.run.recoveries import is_retry

if TYPE_CHECKING:
    from cleveragents_tui.engine.correct.snapshot import Snapshot


def impact_of(
    snapshot: Snapshot, mode: CorrectionMode, guidance: str, choose: int | None = None
) -> Impact:
    """What reverting the snapshot's decision with ``guidance`` does (an append's impact is
    the appended plan: engine/correct/append.py), or the refusal, with the reason."""
    if mode is not CorrectionMode.REVERT:
        raise ValueError(f"impact_of works out a revert, not an {mode.value}")
    found = admitted(snapshot, mode, guidance, choose)
    plan, decision = snapshot.plan, snapshot.decision
    tier = tier_of(snapshot)
    affected = first_affected(snapshot, mode)
    children = child_impacts(snapshot)
    remade: tuple[RemadeDecision, ...] = ()
    rollback = Rollback({}, (), ())
    non_rollbackable: tuple[str, ...] = ()
    if plan.phase is not Phase.STRATEGIZE:  # before it nothing ran that could be rolled back
        # the loader's, unless the snapshot was made otherwise
        rollback = snapshot.rollback or rollback_of(snapshot, tier)
        remade = remade_of(snapshot, affected)
        affected |= {r.decision_id for r in remade} | snapshot.followers
        # ``none`` resources the affected decisions' calls wrote: no checkpoint holds them
        written = {r for d, r in snapshot.none_writes if d in affected}
        non_rollbackable = tuple(sorted(set(rollback.marked) | written))
    rollbackable = rollback.rollbackable
    carried, dropped = later_guidance(
        snapshot.lost, [d for d in snapshot.guidance if d.is_correction], affected
    )
    touched = set(rollbackable) | set(non_rollbackable)
    return with_warnings(
        Impact.bare(
            plan,
            decision,
            mode,
            guidance,
            tier,
            affected_decisions=tuple(sorted(affected)),
            remade=remade,
            children=children,
            rollbackable=rollbackable,
            non_rollbackable=non_rollbackable,
            unaffected=tuple(sorted(r for r in dict.fromkeys(snapshot.used) if r not in touched)),
            irreversible=irreversible_of(
                (tool, effects) for d, tool, effects in snapshot.irreversible if d in affected
            ),
            phase_change=phase_change_of(plan, decision, mode),
            alternatives=found,
            recreated=rollback.recreated,
            outside_changes=tuple(
                c for c in snapshot.outside if c.resource_id in set(rollbackable)
            ),
            guidance_carried=carried,
            guidance_dropped=dropped,
        )
    )


def admitted(
    snapshot: Snapshot, mode: CorrectionMode, guidance: str, choose: int | None
) -> Alternatives | None:
    """The corrected decision's alternatives and what the guidance (or ``choose``) selects,
    once the correction is one that can be made at all."""
    refuse_if_not_correctable(snapshot.plan, snapshot.decision, mode)
    if snapshot.blocker is not None:
        raise CorrectionRefusedError(*snapshot.blocker)
    if mode is CorrectionMode.APPEND and is_retry(snapshot.decision):
        if choose is not None:  # an appended plan makes no retry: nothing to pick from
            raise CorrectionRefusedError(
                f"--choose picks how decision {snapshot.decision.decision_id} settles its "
                "failed call, which only a revert makes again",
                "use --mode=revert, or leave out --choose",
            )
        return None
    return alternatives(
        snapshot.action, snapshot.decision, guidance, snapshot.current_steps, choose
    )


def tier_of(snapshot: Snapshot) -> Tier:
    """The tier the plan's resources allow (ADR-035), named for every correction."""
    items = [snapshot.resources[r] for r in dict.fromkeys(snapshot.used) if r in snapshot.resources]
    return _tier(items)


def phase_change_of(
    plan: Plan, decision: Decision, mode: CorrectionMode
) -> tuple[Phase, Phase] | None:
    """(from, to) when the correction moves the plan back a phase."""
    if mode is not CorrectionMode.REVERT:
        return None
    if decision.phase is Phase.STRATEGIZE and plan.phase is not Phase.STRATEGIZE:
        return (plan.phase, Phase.STRATEGIZE)
    if plan.phase is Phase.APPLY:
        return (plan.phase, decision.phase)
    return None


def first_affected(snapshot: Snapshot, mode: CorrectionMode) -> set[str]:
    """The subtree, and all current Execute work when a revert goes back to Strategize;
    the decisions the rollback re-makes (:func:`remade_of`) come on top."""
    affected = set(snapshot.subtree.decisions)
    change = phase_change_of(snapshot.plan, snapshot.decision, mode)
    if change is not None and change[1] is Phase.STRATEGIZE:
        affected |= snapshot.execute_decisions
    return affected


def child_impacts(snapshot: Snapshot) -> tuple[ChildImpact, ...]:
    """What a revert does to each child plan under the decision; refuses when one is
    already applied."""
    impacts = []
    for child_id in sorted(snapshot.subtree.plans):
        child = snapshot.child_plans.get(child_id)
        if child is None:  # as uow.plans.get says it
            raise NotFoundError(
                f"plan {child_id} does not exist", "list plans with `agents plan list`"
            )
        impacts.append(
            ChildImpact(child.plan_id, child.action, child.phase, child.state, _outcome(child))
        )
    for impact in impacts:
        if impact.outcome is ChildAction.REJECT:
            raise CorrectionRefusedError(
                f"child plan {impact.plan_id} ({impact.action}) spawned under this decision is already applied: "
                "its changes cannot be reverted by its parent",
                f"correct the child plan independently, or use --mode=append on {snapshot.decision.decision_id}",
            )
    return tuple(impacts)


def _outcome(child: Plan) -> ChildAction:
    if child.state is PlanState.APPLIED:
        return ChildAction.REJECT
    if child.state is PlanState.CREATED:
        return ChildAction.CANCEL
    return ChildAction.CANCEL_AND_ROLL_BACK


@dataclass(frozen=True)
class Rollback:
    """What a revert's rollback does to the plan's resources."""

    targets: Mapping[str, CheckpointMetadata]  # resource -> the checkpoint restored
    marked: tuple[str, ...]  # resources that cannot be rolled back
    recreated: tuple[str, ...]  # sandboxes without checkpoints, made anew

    @property
    def rollbackable(self) -> tuple[str, ...]:
        return tuple(sorted({*self.targets, *self.recreated}))


def rollback_of(snapshot: Snapshot, tier: Tier) -> Rollback:
    """The rollback of a revert of a plan past Strategize (engine/core/rollback.py): to the
    decision's checkpoint group, or, for a Strategize decision, to every baseline."""
    decision = snapshot.decision
    if decision.phase is Phase.EXECUTE:
        if tier is not Tier.FULL:
            raise CorrectionRefusedError(*_tier_error(decision, tier))
        owner = snapshot.owner or decision
        targets, marked = targets_from(
            decision.decision_id, owner.phase, snapshot.group, snapshot.checkpoints
        )
        return Rollback(targets, tuple(marked), ())
    targets, marked = baselines_from(snapshot.checkpoints)
    made_anew, shared = unchecked_from(
        snapshot.resources, list(snapshot.named), snapshot.host_plan_id != snapshot.plan.plan_id
    )
    return Rollback(targets, (*marked, *shared), tuple(made_anew))


def remade_of(snapshot: Snapshot, affected: set[str]) -> tuple[RemadeDecision, ...]:
    """The later decisions outside ``affected`` whose writes the rollback erases."""
    return remade_from(snapshot.writes, snapshot.writers, affected)


def irreversible_of(calls: Iterable[tuple[str, tuple[str, ...]]]) -> tuple[IrreversibleEffect, ...]:
    """Irreversible calls (tool, side effects), as made, counted by tool."""
    counts: Counter[str] = Counter()
    effects: dict[str, tuple[str, ...]] = {}
    for tool, side_effects in calls:  # the last one's effects are named
        counts[tool] += 1
        effects[tool] = side_effects
    return tuple(IrreversibleEffect(t, n, effects[t]) for t, n in sorted(counts.items()))


def refuse_if_not_correctable(plan: Plan, decision: Decision, mode: CorrectionMode) -> None:
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


def _predicted(impact: Impact) -> bool:
    """An append whose work is known (the scripted reasoner's), not left to the actor."""
    return impact.append is not None and impact.append.predicted


def with_warnings(impact: Impact) -> Impact:
    """``impact`` with the warnings its findings call for, worded as the specification words
    them (a pure function: the app's snapshots build impacts with it)."""
    warnings = []
    if impact.non_rollbackable:
        listed = _bulleted(impact.non_rollbackable)
        warnings.append(
            "WARNING: The following resources cannot be rolled back (sandbox strategy: none):\n"
            f"{listed}\n\nResource changes since this decision will persist.\n"
            "Proceed with rollback of other resources?"
        )
    if impact.irreversible:
        listed = _bulleted(
            f"{e.tool} ({e.invocations} invocation{'s' if e.invocations != 1 else ''})"
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
        listed = _bulleted(
            f"{c.plan_id} {c.action} ({c.state.value}): {c.outcome.value}" for c in cancelled
        )
        warnings.append(f"WARNING: These child plans will be cancelled:\n{listed}\nProceed?")
    if impact.guidance_dropped:
        listed = _bulleted(guidance_line(g) for g in impact.guidance_dropped)
        warnings.append(
            "WARNING: This revert drops guidance that earlier corrections gave to later\n"
            f"decisions (it supersedes those corrections):\n{listed}\n\n"
            "The replay makes those decisions again without it.\nProceed?"
        )
    return copied(impact, warnings=tuple(warnings))


def _bulleted(lines: Iterable[str]) -> str:
    """A warning's list: one ``  - line`` a line."""
    return "\n".join(f"  - {line}" for line in lines)


def guidance_line(guidance: LaterGuidance) -> str:
    """``'run only the unit test' (step test, correction 01J…)`` for previews and warnings."""
    step = "every step" if guidance.key == "*" else f"step {guidance.key}"
    source = f", correction {guidance.decision_id}" if guidance.decision_id else ""
    return f"{guidance.text!r} ({step}{source})"
