"""The invariant checker: every promise the engine makes about what it stored, checked at once.

``agents doctor`` reports through it, and the reliability suite runs it after every crash and
every injected fault. Each check says what is broken and counts what it looked at
(``checked``). What each invariant checks, and cannot see: docs/reliability.md, "The
invariant checker".

The records' own checks are in :mod:`~cleveragents_tui.engine.ops.record_invariants`; here
are the loading and the checks of the sandboxes and the actors' saved state.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import Phase, PlanState, SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_base_dir, sandbox_root
from cleveragents_tui.engine.ops.invariant_findings import (
    Findings,
    InvariantReport,
    Stored,
    Violation,
)
from cleveragents_tui.engine.ops.record_invariants import RECORD_CHECKS
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.apply_journal import half_applied, landing_began
from cleveragents_tui.engine.run.run_lease import RUNNER_LOCK
from cleveragents_tui.sandbox import transaction_handover
from cleveragents_tui.store.store import Store

__all__ = ["STALE_LOCK_SECONDS", "InvariantReport", "Violation", "check_invariants"]

STALE_LOCK_SECONDS = 600
_ARCHIVE_STRATEGIES = (SandboxStrategyName.FILESYSTEM_COPY, SandboxStrategyName.OVERLAY)


def check_invariants(store: Store, *, base_dir: Path | None = None) -> InvariantReport:
    """Check every invariant; ``base_dir`` is the sandbox folder (default: the configured one)."""
    base = base_dir or sandbox_base_dir()
    stored = _load(store)
    found = Findings()
    for check in RECORD_CHECKS:
        check(stored, found)
    _check_checkpoints(store, base, stored, found)
    _check_archive_objects(base, stored, found)
    _check_stale_locks(base, stored, found)
    _check_actor_state(store, stored, found)
    half = _check_half_applied(store, base, found)
    _check_left_running(store, base, stored, found, half)
    return InvariantReport(found.violations, found.checked)


# -- loading ----------------------------------------------------------------------------------


def _load(store: Store) -> Stored:
    with store.unit_of_work() as uow:
        plans = {p.plan_id: p for p in uow.plans.all()}
        records = uow.invariants.records()
        resources = uow.resources.all()
        triggers = uow.invariants.triggers()
    return Stored(
        **vars(records),  # every field of the records, as they were read
        plans=plans,
        triggers=triggers,
        resources={r.resource_id: r.sandbox_strategy for r in resources},
        locations={r.resource_id: r.location for r in resources},
    )


# -- the sandboxes and the actors -------------------------------------------------------------


def _check_checkpoints(store: Store, base: Path, stored: Stored, found: Findings) -> None:
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


def _check_archive_objects(base: Path, stored: Stored, found: Findings) -> None:
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


def _check_stale_locks(base: Path, stored: Stored, found: Findings) -> None:
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
    store: Store, base: Path, stored: Stored, found: Findings, half: set[str]
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


def _check_half_applied(store: Store, base: Path, found: Findings) -> set[str]:
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


def _check_actor_state(store: Store, stored: Stored, found: Findings) -> None:
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
