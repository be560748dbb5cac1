"""What a correction's preview reads (issue 19): one snapshot of the plan, read in ONE read
transaction with a fixed number of set-based statements whatever the plan's size (issue 22),
then handed to :func:`engine.correct.assess.impact_of`, a pure function.

Which rows are worth reading depends on what was read before (the rolled-back resources
decide whose later writes count; the affected set decides whose tool calls are read), so
the loader asks the same pure rules ``impact_of`` applies (engine/correct/assess.py) as it
goes: a correction they refuse stops the reading at the same point, with the same error.
Two reads are not the database's: the LangGraph checkpoints of the actors (only when an
earlier correction gave guidance) and the sandboxes' files changed outside the plan.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from pydantic import ValidationError

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CorrectionMode, Phase, SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.core.impact import (
    AffectedSubtree,
    InfluenceGraph,
    affected_decisions_in,
    affected_subtree_in,
    subtree_from,
)
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.reconcile import OutsideChanges, Reconciler
from cleveragents_tui.engine.core.restore_point import restore_point_among
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct import assess
from cleveragents_tui.engine.correct.later_guidance import Lost, lost_guidance
from cleveragents_tui.engine.correct.later_writers import remade_from
from cleveragents_tui.engine.correct.model import (
    CorrectionRefusedError,
    CorrectionRequest,
    built,
    copied,
)
from cleveragents_tui.store import correction_queries as queries
from cleveragents_tui.store import snapshot_reads as reads
from cleveragents_tui.store.reading import Reading
from cleveragents_tui.store.replacement_queries import replacements_of
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

_NONE = SandboxStrategyName.NONE
_NO_ACTION = (
    "plan {plan} cannot be corrected: it has no stored action to replay (a recorded sample, "
    "as `agents demo-data` loads, or a plan not started with `agents plan use`), so neither "
    "a revert nor an append can run",
    "try corrections on a plan that runs: `agents demo` builds one, or start a plan with "
    "`agents plan use ACTION`",
)


@dataclass(frozen=True)
class Snapshot:
    """Everything a correction's impact is worked out from, as read at one instant."""

    decision: Decision  # the corrected one (``superseded_by``: what replaced it, as shown)
    plan: Plan
    resources: Mapping[str, Resource]  # every registered resource, by id
    used: tuple[str, ...]  # resources checkpointed in the plan, then those its action names
    named: tuple[str, ...]  # the resources its stored action names
    action: Action | None  # the plan's stored action, validated; None without one
    blocker: tuple[str, str] | None  # why the plan cannot run again (problem, fix)
    current_steps: Mapping[str, tuple[str, str]]  # step key -> (decision, option), current
    # -- a revert's ------------------------------------------------------------------------
    subtree: AffectedSubtree = field(
        default_factory=lambda: AffectedSubtree(frozenset(), frozenset())
    )
    execute_decisions: frozenset[str] = frozenset()  # current, read when all Execute work goes
    child_plans: Mapping[str, Plan] = field(default_factory=dict)  # those of the subtree
    host_plan_id: str = ""  # whose sandboxes the plan works in: its own, or its host's
    checkpoints: tuple[CheckpointMetadata, ...] = ()  # each resource's first, oldest first
    owner: Decision | None = None  # the restore point: whose checkpoint group is restored
    group: tuple[CheckpointMetadata, ...] = ()  # the owner's group, by resource
    writes: tuple[tuple[str, str], ...] = ()  # (decision, resource) rolled back, after owner
    writers: Mapping[str, Decision] = field(default_factory=dict)  # of those writes, by id
    followers: frozenset[str] = frozenset()  # the writers' dependents
    none_writes: tuple[tuple[str, str], ...] = ()  # (decision, ``none`` resource) named
    irreversible: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (decision, tool, effects)
    outside: tuple[OutsideChanges, ...] = ()  # files changed outside the plan, per sandbox
    guidance_rows: tuple[object, ...] = ()  # their rows, read first (a revert hydrates them)
    guidance: tuple[Decision, ...] = ()  # the plan's corrections' guidance decisions
    lost: Lost = ()  # guidance entries the restored actor states lack
    # the revert's rollback as ``assess.rollback_of`` works it out from this snapshot (the
    # loader needs it first), so the impact does not work it out again; None: not yet
    rollback: assess.Rollback | None = None


def load(store: Store, request: CorrectionRequest) -> Snapshot:
    """The snapshot the correction ``request`` is previewed from. Changes nothing; raises
    what :func:`assess.impact_of` would raise at the point it would raise it."""
    mode = request.mode
    with store.reading() as uow:  # one snapshot, without the ORM's session (issue 22)
        snapshot, refs = _basics(store, uow, request)
        assess.admitted(snapshot, mode, request.guidance, request.choose)
        if mode is CorrectionMode.APPEND:
            return snapshot
        snapshot, rollback = _revert(uow, snapshot, refs)
    outside: tuple[OutsideChanges, ...] = ()
    if rollback is not None:
        sandboxes = PlanSandboxes(
            store,
            snapshot.plan.plan_id,
            request.sandbox_base,
            host_plan_id=snapshot.host_plan_id,
            resources=snapshot.resources,
        )
        rolled = rollback.rollbackable
        outside = tuple(Reconciler(sandboxes, rolled, snapshot.plan.attempt).outside_changes())
    lost: Lost = ()
    if any(d.is_correction for d in snapshot.guidance):  # else: no actor state to read
        phase_change = assess.phase_change_of(snapshot.plan, snapshot.decision, mode)
        lost = lost_guidance(store, snapshot.decision, phase_change)
    return copied(snapshot, outside=outside, lost=lost) if outside or lost else snapshot


def _basics(
    store: Store, uow: Reading, request: CorrectionRequest
) -> tuple[Snapshot, frozenset[str] | None]:
    """What every correction is checked against: the decision, its plan, the resources, the
    plan's action and profile, the current decision of each of the action's steps; and for
    a revert the rows of the decision's affected-subtree CTE, read with them (one round trip
    less on PostgreSQL), unless an open graph holds the decision."""
    decision_id = uow.resolve_decision(request.decision_ref)
    cold = request.mode is CorrectionMode.REVERT and not OPEN_GRAPHS.holds(decision_id)
    read = uow.run(reads.basics, decision_id, subtree=cold)
    decision = read.decision
    if decision.superseded_by is not None:  # refused, naming what replaced it
        named = uow.run(replacements_of, decision.plan_id, [decision.decision_id])
        replaced_by = named[decision.decision_id]
        decision = decision.model_copy(update={"superseded_by": replaced_by})
    plan_ref = request.plan_ref
    if plan_ref is not None and uow.plans.resolve(plan_ref) != decision.plan_id:
        raise CorrectionRefusedError(
            f"decision {decision.decision_id} belongs to plan {decision.plan_id}, not {plan_ref}",
            f"see that plan's decisions with `agents plan tree {plan_ref}`",
        )
    key = (_PLAN_PART, read.plan.plan_id)
    part = read.derived.get(key)
    if part is None:
        part = read.derived[key] = _plan_part(store, uow, read, decision)
    return copied(part, decision=decision), read.refs


_PLAN_PART = "engine.correct.snapshot"  # the key of a plan's part in ``Basics.derived``


def _plan_part(store: Store, uow: Reading, read: reads.Basics, decision: Decision) -> Snapshot:
    """The snapshot of a correction of ``decision`` before its revert's reads: all of it but
    the decision is worked out from the plan-level reads and the database as read alone,
    so it is kept with those reads (``Basics.derived``, until the database changes) and
    each preview of the plan copies it with its decision (issue 22)."""
    plan, stored, checkpoints = read.plan, read.definition, tuple(read.checkpoints)
    used = sorted({c.resource_id for c in checkpoints})
    named, checked = _stored_action(stored) if stored is not None else ((), None)
    action, blocker = _runnable(store, uow, plan, checked)
    keys = {p.key for p in action.decisions} if action is not None else set()
    return built(  # as Snapshot(...) builds it, for less (engine/correct/model.py)
        Snapshot,
        {
            "decision": decision,
            "plan": plan,
            "resources": {r.resource_id: r for r in read.resources},
            "used": (*used, *named),
            "named": named,
            "action": action,
            "blocker": blocker,
            # only the action's steps are looked up: not every current decision of a large plan
            "current_steps": uow.run(reads.current_steps, plan.plan_id, keys, read.version),
            "host_plan_id": read.host_plan_id,
            "checkpoints": checkpoints,
            "guidance_rows": tuple(read.guidance),
        },
    )


def replayable(
    store: Store, uow: UnitOfWork | Reading, plan: Plan, definition: dict[str, object] | None
) -> tuple[Action | None, tuple[str, str] | None]:
    """The plan's action, validated, and why the plan cannot run again, if it cannot: what
    :class:`PlanRunner` loads to start, the action and the profile."""
    return _runnable(store, uow, plan, _checked(definition))


@lru_cache(maxsize=64)
def _stored_action(stored: str) -> tuple[tuple[str, ...], Action | int | None]:
    """(the resources a plan's stored action names, the action validated — or how many
    errors its validation found; None when the stored text is not a JSON object), worked
    out once per text: a stored action never changes, and validating it was a fifth of a
    small preview's Python (issue 22). The action is frozen, so sharing it is safe."""
    definition = None
    with contextlib.suppress(ValueError):  # invalid JSON: as a plan without an action
        definition = json.loads(stored)
    if not isinstance(definition, dict):
        return (), None
    listed = definition.get("resources", [])
    named = tuple(str(r) for r in listed) if isinstance(listed, list) else ()
    return named, _checked(definition)


def _checked(definition: dict[str, object] | None) -> Action | int | None:
    if definition is None:
        return None
    try:
        return Action.model_validate(definition)
    except ValidationError as exc:
        return exc.error_count()


def _runnable(
    store: Store, uow: UnitOfWork | Reading, plan: Plan, checked: Action | int | None
) -> tuple[Action | None, tuple[str, str] | None]:
    if checked is None:
        problem, fix = _NO_ACTION
        return None, (problem.format(plan=plan.plan_id), fix)
    if isinstance(checked, int):
        return None, _cannot_run(plan, counted(checked, "error"))
    name = plan.automation_profile
    if name not in ProfileRegistry.builtins() and uow.automation_profiles.get(name) is None:
        try:  # the registry words the error
            ProfileRegistry(store).get(name)
        except UserError as exc:
            return checked, _cannot_run(plan, exc.problem)
    return checked, None


def _cannot_run(plan: Plan, problem: str) -> tuple[str, str]:
    return (
        f"plan {plan.plan_id} cannot be corrected: it cannot be run again ({problem})",
        "start a new plan with `agents plan use ACTION`",
    )


def _revert(
    uow: Reading, snapshot: Snapshot, refs: frozenset[str] | None
) -> tuple[Snapshot, assess.Rollback | None]:
    """The snapshot with what a revert reads, and its rollback when it rolls sandboxes back
    (then the files changed outside the plan are read next). ``refs``: the rows of the
    decision's affected-subtree CTE, when read with the basics."""
    plan, decision = snapshot.plan, snapshot.decision
    warm = OPEN_GRAPHS.holding(plan.plan_id)  # kept by a long-lived process (the app)
    if warm:
        subtree = warm.affected(decision.decision_id)
    elif refs is not None:
        subtree = subtree_from(decision.decision_id, refs)
    else:
        subtree = affected_subtree_in(uow, decision.decision_id)
    phase_change = assess.phase_change_of(plan, decision, CorrectionMode.REVERT)
    execute_decisions: frozenset[str] = frozenset()
    if phase_change is not None and phase_change[1] is Phase.STRATEGIZE:
        execute_decisions = frozenset(
            uow.run(reads.current_decision_ids, plan.plan_id, Phase.EXECUTE.value)
        )
    guidance = tuple(uow.run(reads.hydrated, list(snapshot.guidance_rows)))
    sandboxed = plan.phase is not Phase.STRATEGIZE
    snapshot = copied(
        snapshot,
        subtree=subtree,
        execute_decisions=execute_decisions,
        child_plans=uow.run(reads.plans, subtree.plans),
        guidance=guidance,
        # the restore point is read with the rest (it raises nothing), used once checked
        owner=_restore_point(uow, decision, guidance) if sandboxed else None,
    )
    if snapshot.owner is not None and decision.phase is Phase.EXECUTE:
        group = tuple(uow.run(reads.checkpoint_group, snapshot.owner.decision_id))
        snapshot = copied(snapshot, group=group)
    assess.child_impacts(snapshot)
    affected = assess.first_affected(snapshot, CorrectionMode.REVERT)
    later: queries.Later | None = None
    rollback = None
    if sandboxed:
        rollback = assess.rollback_of(snapshot, assess.tier_of(snapshot))
        owner = snapshot.owner
        if rollback.targets and owner is not None:
            later = (owner.plan_id, owner.sequence_number, rollback.targets)
    nones = {r for r, v in snapshot.resources.items() if v.sandbox_strategy is _NONE}
    # the affected calls and the later writes together (one round trip on PostgreSQL); the
    # calls of the decisions the writes bring in, in a statement of their own if any
    calls, writes = uow.run(queries.calls_of, affected, nones, later)
    writers = _writers(uow, writes, affected, warm)
    more = {r.decision_id for r in remade_from(writers[0], writers[1], affected)}
    more = (more | writers[2]) - affected
    if more:
        calls = sorted([*calls, *uow.run(queries.calls_of, more, nones)[0]], key=lambda c: c[0])
    snapshot = copied(
        snapshot,
        writes=writers[0],
        writers=writers[1],
        rollback=rollback,
        followers=writers[2],
        none_writes=tuple(dict.fromkeys((d, r) for d, r, *_ in calls if r in nones)),
        irreversible=tuple((d, tool, fx) for d, _, tool, irreversible, fx in calls if irreversible),
    )
    return snapshot, rollback


def _restore_point(uow: Reading, decision: Decision, guidance: tuple[Decision, ...]) -> Decision:
    correcting = [g for g in guidance if g.corrects_decision_id]
    found = uow.run(reads.decisions, {str(g.corrects_decision_id) for g in correcting})
    corrected = {g.decision_id: found[str(g.corrects_decision_id)] for g in correcting}
    return restore_point_among(decision, correcting, corrected)


# a revert's later writes to the resources it rolls back (decision, resource), their
# decisions by id, and the decisions that depend on those outside the affected set
Writers = tuple[tuple[tuple[str, str], ...], Mapping[str, Decision], frozenset[str]]


def _writers(
    uow: Reading, writes: list[tuple[str, str]], affected: set[str], warm: InfluenceGraph | None
) -> Writers:
    """The later writes to the resources the revert rolls back, their decisions, and the
    decisions that depend on those outside ``affected``."""
    if not writes:
        return (), {}, frozenset()
    outside = sorted({d for d, _ in writes if d not in affected})
    followers: frozenset[str] = frozenset()
    if outside:
        followers = (
            frozenset().union(*(warm.affected(d).decisions for d in outside))
            if warm
            else affected_decisions_in(uow, outside)
        )
    return tuple(writes), uow.run(reads.decisions, outside), followers - affected
