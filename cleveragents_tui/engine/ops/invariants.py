"""The invariant checker: every promise the engine makes about what it stored, checked at once.

``agents doctor`` reports through it, and the reliability suite runs it after every crash and
every injected fault. Each check says what is broken and counts what it looked at
(``checked``). What each invariant checks, and cannot see: docs/reliability.md, "The
invariant checker". Over 500 lines: one short check per promise, all sharing one loaded
snapshot of the store (``_Stored``) and one list of findings.
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from cleveragents_tui.domain.checkpoint import CheckpointGroup, CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CheckpointGroupStatus,
    CorrectionMode,
    CorrectionStatus,
    DecisionType,
    Phase,
    PlanState,
    SandboxStrategyName,
)
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_base_dir, sandbox_root
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.apply_journal import half_applied, landing_began
from cleveragents_tui.engine.run.run_lease import RUNNER_LOCK
from cleveragents_tui.sandbox import transaction_handover
from cleveragents_tui.store.store import Store

STALE_LOCK_SECONDS = 600
_ARCHIVE_STRATEGIES = (SandboxStrategyName.FILESYSTEM_COPY, SandboxStrategyName.OVERLAY)


@dataclass(frozen=True)
class Violation:
    invariant: str
    subject: str
    message: str


@dataclass(frozen=True)
class InvariantReport:
    violations: list[Violation]
    checked: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass
class _Stored:
    """Everything the checks read, loaded in one read transaction (one consistent view)."""

    plans: dict[str, Plan]
    decisions: list[Decision]
    invalid: list[tuple[str, str]]  # (decision id, why): rows that are no valid decision
    groups: list[CheckpointGroup]
    checkpoints: list[CheckpointMetadata]
    corrections: list[CorrectionAttempt]
    run_here: set[str]
    contexts: dict[str, str]
    triggers: tuple[set[str], set[str]]  # (expected, present); none expected: cannot ask
    applied_at: dict[str, datetime]
    last_event: dict[str, datetime]
    resources: dict[str, SandboxStrategyName]
    locations: dict[str, str]


@dataclass
class _Findings:
    violations: list[Violation] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    def examined(self, invariant: str, things: int = 1) -> None:
        self.checked[invariant] = self.checked.get(invariant, 0) + things

    def add(self, invariant: str, subject: str, message: str) -> None:
        self.violations.append(Violation(invariant, subject, message))


def check_invariants(store: Store, *, base_dir: Path | None = None) -> InvariantReport:
    """Check every invariant; ``base_dir`` is the sandbox folder (default: the configured one)."""
    base = base_dir or sandbox_base_dir()
    stored = _load(store)
    found = _Findings()
    for check in _RECORD_CHECKS:
        check(stored, found)
    _check_checkpoints(store, base, stored, found)
    _check_archive_objects(base, stored, found)
    _check_stale_locks(base, stored, found)
    _check_actor_state(store, stored, found)
    half = _check_half_applied(store, base, found)
    _check_left_running(store, base, stored, found, half)
    return InvariantReport(found.violations, found.checked)


# -- loading ----------------------------------------------------------------------------------


def _load(store: Store) -> _Stored:
    with store.unit_of_work() as uow:
        plans = {p.plan_id: p for p in uow.plans.all()}
        records = uow.invariants.records()
        resources = uow.resources.all()
        triggers = uow.invariants.triggers()
    return _Stored(
        plans=plans,
        decisions=records.decisions,
        invalid=records.invalid,
        groups=records.groups,
        checkpoints=records.checkpoints,
        corrections=records.corrections,
        run_here=records.run_here,
        contexts=records.contexts,
        triggers=triggers,
        applied_at=records.applied_at,
        last_event=records.last_event,
        resources={r.resource_id: r.sandbox_strategy for r in resources},
        locations={r.resource_id: r.location for r in resources},
    )


# -- the records ------------------------------------------------------------------------------


def _pending_groups(stored: _Stored, found: _Findings) -> None:
    found.examined("pending-group", len(stored.groups))
    for group in stored.groups:
        if group.status is CheckpointGroupStatus.PENDING:
            found.add(
                "pending-group",
                group.group_id,
                f"checkpoint group of plan {group.plan_id} was left pending by a crash",
            )


def _execute_groups(stored: _Stored, found: _Findings) -> None:
    committed: dict[str, list[CheckpointGroup]] = defaultdict(list)
    for group in stored.groups:
        found.examined("group-without-decision")
        if group.status is not CheckpointGroupStatus.COMMITTED:
            continue
        if group.decision_id is None:
            found.add("group-without-decision", group.group_id, "committed group has no decision")
        else:
            committed[group.decision_id].append(group)
    by_id = {d.decision_id: d for d in stored.decisions}
    for decision_id, groups in committed.items():
        decision = by_id.get(decision_id)
        if decision is None or decision.plan_id != groups[0].plan_id:
            found.add(
                "group-without-decision",
                groups[0].group_id,
                f"committed group names decision {decision_id}, which is not in its plan",
            )
    group_of = {g.group_id: g for g in stored.groups}
    for checkpoint in stored.checkpoints:
        owner = group_of.get(checkpoint.group_id) if checkpoint.group_id else None
        if owner is not None and owner.decision_id != checkpoint.decision_id:
            found.add(
                "execute-group",
                checkpoint.checkpoint_id,
                f"checkpoint of {checkpoint.resource_id} is in group {owner.group_id} of decision "
                f"{owner.decision_id} but names decision {checkpoint.decision_id}",
            )
    for decision in stored.decisions:
        if (
            decision.phase is not Phase.EXECUTE
            or decision.decision_type is DecisionType.USER_INTERVENTION
            or decision.plan_id not in stored.run_here
        ):
            continue
        found.examined("execute-group")
        groups = committed.get(decision.decision_id, [])
        if len(groups) != 1:
            found.add(
                "execute-group",
                decision.decision_id,
                f"Execute decision of plan {decision.plan_id} has {len(groups)} committed "
                "checkpoint groups, not one",
            )


def _append_only(stored: _Stored, found: _Findings) -> None:
    expected, present = stored.triggers
    if expected:
        found.examined("append-only")
        missing = sorted(expected - present)
        if missing:
            found.add(
                "append-only",
                "decisions",
                f"the append-only triggers {', '.join(missing)} are missing: decisions can be "
                "deleted or edited",
            )
    for decision_id, why in stored.invalid:
        found.examined("append-only")
        found.add("append-only", decision_id, f"the row is not a valid decision: {why}")
    sequence_of = {d.decision_id: d.sequence_number for d in stored.decisions}
    by_plan: dict[str, list[Decision]] = defaultdict(list)
    for decision in stored.decisions:
        by_plan[decision.plan_id].append(decision)
    for plan_id, decisions in by_plan.items():
        found.examined("append-only", len(decisions))
        numbers = [d.sequence_number for d in decisions]
        if numbers != list(range(len(numbers))):
            gaps = sorted(set(range(max(numbers) + 1)) - set(numbers))
            found.add(
                "append-only",
                plan_id,
                f"decision sequence numbers {', '.join(map(str, gaps[:10]))} are missing: "
                "decisions were deleted",
            )
        for decision in decisions:
            parent = decision.parent_decision_id
            if parent is not None and sequence_of.get(parent, -1) >= decision.sequence_number:
                found.add(
                    "append-only",
                    decision.decision_id,
                    f"its parent {parent} was not recorded before it",
                )


def _context_hashes(stored: _Stored, found: _Findings) -> None:
    for decision in stored.decisions:
        digest = decision.context_snapshot.hot_context_hash
        if digest is None:
            continue
        found.examined("context-hash")
        body = stored.contexts.get(digest)
        if body is None:
            problem = "its stored context is missing"
        elif hashlib.sha256(body.encode("utf-8")).hexdigest() != digest:
            problem = "its stored context does not match its hash"
        elif decision.context_snapshot.hot_context_ref not in (None, f"context:{digest}"):
            problem = (
                f"hot_context_ref {decision.context_snapshot.hot_context_ref} names another context"
            )
        else:
            continue
        found.add("context-hash", decision.decision_id, problem)


def _current_trees(stored: _Stored, found: _Findings) -> None:
    current: dict[str, dict[str, Decision]] = defaultdict(dict)
    for decision in stored.decisions:
        if decision.superseded_by is None:
            current[decision.plan_id][decision.decision_id] = decision
    for plan_id, decisions in current.items():
        found.examined("current-tree", len(decisions))
        roots = [d.decision_id for d in decisions.values() if d.parent_decision_id is None]
        if len(roots) != 1:
            found.add(
                "current-tree",
                plan_id,
                f"the current decisions have {len(roots)} roots, not one"
                + (f" ({', '.join(roots[:5])})" if roots else ""),
            )
        for decision in decisions.values():
            parent = decision.parent_decision_id
            if parent is not None and parent not in decisions:
                found.add(
                    "current-tree",
                    decision.decision_id,
                    f"current decision hangs under {parent}, which is superseded or missing",
                )


def _superseded_by(stored: _Stored, found: _Findings) -> None:
    by_id = {d.decision_id: d for d in stored.decisions}
    targeted = {(c.plan_id, c.target_decision_id) for c in stored.corrections}
    for decision in stored.decisions:
        by = decision.superseded_by
        if by is None:
            continue
        found.examined("superseded-by")
        correction = by_id.get(by)
        if correction is None or correction.plan_id != decision.plan_id:
            problem = f"superseded by {by}, which is not a decision of its plan"
        elif not correction.is_correction:
            problem = f"superseded by {by}, which is not a correction"
        elif (decision.plan_id, correction.corrects_decision_id) not in targeted:
            problem = (
                f"superseded by {by}, but no correction attempt targets "
                f"{correction.corrects_decision_id}"
            )
        else:
            continue
        found.add("superseded-by", decision.decision_id, problem)


def _applied_unchanged(stored: _Stored, found: _Findings) -> None:
    later: dict[str, list[str]] = defaultdict(list)

    def after(plan_id: str, created: datetime, what: str) -> None:
        applied = stored.applied_at.get(plan_id)
        if applied is not None and created > applied:
            later[plan_id].append(what)

    for decision in stored.decisions:
        after(decision.plan_id, decision.created_at, f"decision {decision.decision_id}")
    for group in stored.groups:
        after(group.plan_id, group.created_at, f"checkpoint group {group.group_id}")
    for correction in stored.corrections:
        if correction.mode is CorrectionMode.REVERT:
            after(correction.plan_id, correction.created_at, f"revert {correction.correction_id}")
    for plan_id, applied in stored.applied_at.items():
        found.examined("applied-unchanged")
        plan = stored.plans.get(plan_id)
        if plan is not None and plan.state is not PlanState.APPLIED:
            found.add("applied-unchanged", plan_id, f"applied at {applied}, now {plan.state.value}")
        if later[plan_id]:
            found.add(
                "applied-unchanged",
                plan_id,
                f"changed after it was applied at {applied}: {', '.join(later[plan_id][:5])}",
            )


def _corrections_finished(stored: _Stored, found: _Findings) -> None:
    by_id = {d.decision_id: d for d in stored.decisions}
    for c in stored.corrections:
        found.examined("correction-finished")
        problem = None
        if c.status is CorrectionStatus.RUNNING:
            problem = "still running: interrupted by a crash, or running in another process now"
        elif c.status is CorrectionStatus.FAILED:
            plan = stored.plans.get(c.plan_id)
            moved_on = c.finished_at is not None and (
                stored.last_event.get(c.plan_id, c.finished_at) > c.finished_at
            )
            if not c.report:
                problem = "failed without a report of what happened to each resource"
            elif (
                plan is not None
                and plan.state is not PlanState.ERRORED
                and not plan.state.is_terminal  # an applied plan stays applied
                and not moved_on
            ):
                problem = f"failed, but left plan {c.plan_id} {plan.state.value}, not errored"
        elif c.status is CorrectionStatus.SUCCEEDED:
            made = by_id.get(c.replacement_decision_id or "")
            if c.mode is CorrectionMode.REVERT and (made is None or not made.is_correction):
                problem = "succeeded without the correction decision it records"
            if c.mode is CorrectionMode.APPEND and c.appended_plan_id not in stored.plans:
                problem = "succeeded without the plan it appended"
        if problem is not None:
            found.add("correction-finished", c.correction_id, f"plan {c.plan_id}: {problem}")


_RECORD_CHECKS: tuple[Callable[[_Stored, _Findings], None], ...] = (
    _pending_groups,
    _execute_groups,
    _append_only,
    _context_hashes,
    _current_trees,
    _superseded_by,
    _applied_unchanged,
    _corrections_finished,
)


# -- the sandboxes and the actors -------------------------------------------------------------


def _check_checkpoints(store: Store, base: Path, stored: _Stored, found: _Findings) -> None:
    """Every live checkpoint of a plan still in progress exists (applied or cancelled plans
    may have discarded their sandboxes)."""
    by_plan: dict[str, list[CheckpointMetadata]] = defaultdict(list)
    for checkpoint in stored.checkpoints:
        if checkpoint.rollbackable:
            by_plan[checkpoint.plan_id].append(checkpoint)
    for plan_id, checkpoints in by_plan.items():
        plan = stored.plans.get(plan_id)
        if plan is None or plan.state.is_terminal:
            continue
        sandboxes = PlanSandboxes(store, plan_id, base)
        # Landed (or landing) by an Apply a crash stopped: ``half-applied`` reports that.
        landing = landing_began(store, sandboxes.host_plan_id)
        # A database sandbox taken to verify it is handed back when the check ends.
        with transaction_handover.pinned(sandboxes.base_dir / sandboxes.host_plan_id):
            for checkpoint in checkpoints:
                found.examined("checkpoint-missing")
                if checkpoint.resource_id in landing:
                    continue
                try:
                    sandbox = sandboxes.get(checkpoint.resource_id)
                    if getattr(sandbox, "status", None) == "applied":
                        continue  # landed by an Apply still under way: its savepoints went
                    sandbox.verify(checkpoint.ref)
                except UserError as exc:
                    found.add(
                        "checkpoint-missing",
                        f"{checkpoint.resource_id}@{checkpoint.checkpoint_id}",
                        f"plan {plan_id}: {exc}",
                    )


def _check_archive_objects(base: Path, stored: _Stored, found: _Findings) -> None:
    """Every object of every archive store on disk, reread and hashed."""
    from cleveragents_tui.sandbox.base import CheckpointMissingError
    from cleveragents_tui.sandbox.objectstore.objects import ObjectStore

    for plan_id in stored.plans:
        for resource_id, strategy in stored.resources.items():
            if strategy not in _ARCHIVE_STRATEGIES:
                continue
            folder = sandbox_root(base, plan_id, resource_id) / "objects"
            if not folder.is_dir():
                continue
            objects = ObjectStore(folder, durable=False)
            for oid in sorted(objects.oids()):
                found.examined("archive-object")
                try:
                    objects.check(oid)
                except CheckpointMissingError as exc:
                    found.add("archive-object", f"{resource_id}:{oid}", f"plan {plan_id}: {exc}")


# Files held with flock(): their presence is not a lock, and the lock goes with its process
# (a database sandbox's, see transaction_rollback; a plan runner's, see run_lease).
FLOCK_FILES = frozenset({"transaction_rollback.lock", RUNNER_LOCK})


def _check_stale_locks(base: Path, stored: _Stored, found: _Findings) -> None:
    places = [base] + [
        Path(stored.locations[r]) / ".git" / "worktrees"
        for r, strategy in stored.resources.items()
        if strategy is SandboxStrategyName.GIT_WORKTREE
    ]
    now = time.time()
    for place in places:
        if not place.is_dir():
            continue
        for lock in place.rglob("*.lock"):
            if lock.name in FLOCK_FILES:
                continue
            found.examined("stale-lock")
            try:
                age = now - lock.lstat().st_mtime
            except OSError:
                continue
            if age > STALE_LOCK_SECONDS:
                found.add(
                    "stale-lock", str(lock), f"lock file left behind {int(age // 60)} minutes ago"
                )


def run_by_parent(plan: Plan, plans: dict[str, Plan]) -> bool:
    """Whether the plan's parent runs it on: a child plan is advanced by its parent's run
    (PlanRunner._run_children) until the parent has finished Execute, so resuming the
    parent resumes it; the parent stands for it."""
    parent = plans.get(plan.parent_plan_id or "")
    return parent is not None and not (
        parent.state.is_terminal or parent.state is PlanState.COMPLETED
    )


def is_left_running(store: Store, base: Path, plan_id: str) -> bool:
    """Whether the plan is ``running`` now with no live runner and no running correction.
    The lock is probed first and the plan read after: a runner sets a plan running only
    while it holds the lock, and leaves it otherwise before it lets go."""
    if run_lease.is_held(base, plan_id, store):
        return False
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        return plan.state is PlanState.RUNNING and uow.corrections.running(plan_id) is None


def _check_left_running(
    store: Store, base: Path, stored: _Stored, found: _Findings, half: set[str]
) -> None:
    """A plan ``running`` that no process advances (a running correction is reported by
    ``correction-finished``; the crash that interrupted it left the plan running too; an
    Apply stopped halfway by ``half-applied``, in ``half``)."""
    running = [
        p
        for p in stored.plans.values()
        if p.plan_id in stored.run_here
        and p.plan_id not in half
        and p.state is PlanState.RUNNING
        and not run_by_parent(p, stored.plans)
    ]
    found.examined("left-running", len(running))
    for plan in running:
        if not is_left_running(store, base, plan.plan_id):
            continue
        found.add(
            "left-running",
            plan.plan_id,
            f"plan {plan.plan_id} is {plan.phase.value} · running, but no process is running "
            "it: the run stopped (a crash or an error) without recording where",
        )


def _check_half_applied(store: Store, base: Path, found: _Findings) -> set[str]:
    """An Apply a crash (or a refusal) stopped halfway: the real resources are a mix.
    Returns the plans reported."""
    stopped = half_applied(store)
    found.examined("half-applied", len(stopped))
    reported = set()
    for plan in stopped:
        if not run_lease.is_held(base, plan.plan_id, store):
            found.add("half-applied", plan.plan_id, plan.message)
            reported.add(plan.plan_id)
    return reported


def _check_actor_state(store: Store, stored: _Stored, found: _Findings) -> None:
    """Each decision's LangGraph checkpoint loads under its own thread (superseded ones too:
    a fork keeps the old branch in history)."""
    by_actor: dict[tuple[str, Phase], list[Decision]] = defaultdict(list)
    for decision in stored.decisions:
        if decision.context_snapshot.actor_state_ref is not None:
            by_actor[(decision.plan_id, decision.phase)].append(decision)
    if not by_actor:
        return
    from cleveragents_tui.actors.checkpointer import open_checkpointer
    from cleveragents_tui.actors.graphs import ROLE, Actor

    with open_checkpointer(store.engine.url) as saver:
        for (plan_id, phase), decisions in by_actor.items():
            actor = Actor(saver, plan_id, phase, lambda state, ref: {}) if phase in ROLE else None
            for decision in decisions:
                found.examined("actor-state")
                ref = decision.context_snapshot.actor_state_ref
                assert ref is not None
                try:
                    if actor is None:
                        raise UserError(f"no actor records {phase.value} decisions")
                    actor.load(ref)
                except UserError as exc:
                    found.add("actor-state", decision.decision_id, str(exc))
