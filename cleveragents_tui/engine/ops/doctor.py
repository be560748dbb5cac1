"""``agents doctor``: the invariant checker's findings, each with what to do about it (like
git fsck), and the repairs ``--repair`` makes after a crash.

The checks themselves live in :mod:`cleveragents_tui.engine.ops.invariants`, so the doctor, the
reliability suite and anyone else see the same verdict.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.enums import CorrectionStatus, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.ops.invariants import (
    STALE_LOCK_SECONDS,
    check_invariants,
    run_by_parent,
)
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.lifecycle import pause_left_running
from cleveragents_tui.store.store import Store

__all__ = [
    "STALE_LOCK_SECONDS",
    "DoctorReport",
    "Problem",
    "repair_corrections",
    "repair_half_applied",
    "repair_left_running",
    "run_checks",
]

_BACKUP = "restore the database from a backup"
FIXES = {
    "pending-group": "run `agents doctor --repair` to drop them",
    "execute-group": _BACKUP,
    "group-without-decision": _BACKUP,
    "append-only": "run `agents db upgrade` on a copy, or restore the database from a backup",
    "context-hash": _BACKUP,
    "current-tree": _BACKUP,
    "superseded-by": _BACKUP,
    "applied-unchanged": _BACKUP,
    "correction-finished": "make sure no agents process is running, then run "
    "`agents doctor --repair` to mark it failed (the plan becomes errored)",
    "checkpoint-missing": "corrections cannot roll back to this checkpoint; restore the sandbox "
    "folder from a backup or correct with --mode=append",
    "archive-object": "restore the sandbox folder from a backup; corrections to checkpoints "
    "that need this object are refused",
    "stale-lock": "make sure no agents or git process is running, then delete it",
    "actor-state": "restore the actor checkpoint database from a backup; correct with "
    "--mode=append",
    "half-applied": "run `agents doctor --repair` or `agents plan run PLAN` to land the rest "
    "(what landed is kept); if a resource refuses, the plan stays constrained with the reason",
    "left-running": "go on with `agents plan run PLAN` (it resumes from its last recorded "
    "decision), or run `agents doctor --repair` to mark it paused",
}


@dataclass(frozen=True)
class Problem:
    check: str
    subject: str
    message: str
    fix: str


@dataclass(frozen=True)
class DoctorReport:
    problems: list[Problem]
    checkpoints_verified: int
    checked: dict[str, int]


def run_checks(store: Store, base_dir: Path | None = None) -> DoctorReport:
    report = check_invariants(store, base_dir=base_dir)
    problems = [
        Problem(v.invariant, v.subject, v.message, FIXES[v.invariant]) for v in report.violations
    ]
    missing = sum(1 for p in problems if p.check == "checkpoint-missing")
    verified = report.checked.get("checkpoint-missing", 0) - missing
    return DoctorReport(problems, verified, report.checked)


@dataclass(frozen=True)
class RepairedCorrection:
    correction_id: str
    plan_id: str


def repair_corrections(store: Store) -> list[RepairedCorrection]:
    """Mark corrections a crash left ``running`` failed, and their plans errored.

    What the correction had done to the resources is unknown, so the plan is errored: a new
    correction (or `agents plan run`) starts again from recorded checkpoints. Only run this
    when no agents process is running: a correction still in progress looks the same.
    """
    repaired: list[RepairedCorrection] = []
    with store.unit_of_work(write=True) as uow:
        for plan in uow.plans.all():
            for correction in uow.corrections.for_plan(plan.plan_id):
                if correction.status is not CorrectionStatus.RUNNING:
                    continue
                uow.corrections.finish(
                    correction.correction_id,
                    CorrectionStatus.FAILED,
                    report={"error": "interrupted: the process ended before the correction did"},
                )
                if not plan.state.is_terminal:  # an applied plan (append mode) stays applied
                    uow.plans.save(
                        plan.model_copy(
                            update={"state": PlanState.ERRORED, "updated_at": utc_now()}
                        )
                    )
                uow.events.append(
                    "correction_finished",
                    {"correction_id": correction.correction_id, "status": "failed"},
                    plan_id=plan.plan_id,
                    actor="agents doctor --repair",
                )
                repaired.append(RepairedCorrection(correction.correction_id, plan.plan_id))
        uow.commit()
    return repaired


def repair_left_running(store: Store, base_dir: Path | None = None) -> list[str]:
    """Mark plans a dead run left ``running`` paused; returns their ids.

    Paused is what such a plan is: nothing advances it until someone resumes it (`agents
    plan run`, or R in the app), which goes on from its last recorded decision (and runs on
    the child plans its run left running: they stay as they are). Each plan is
    held (its run lease) while it is repaired, so a live runner's plan is left alone — on
    PostgreSQL one a runner on another machine advances too (the lease is an advisory lock
    on the server).
    """
    repaired: list[str] = []
    with store.unit_of_work() as uow:
        plans = {p.plan_id: p for p in uow.plans.all()}
    running = [
        p.plan_id
        for p in plans.values()
        if p.state is PlanState.RUNNING and not run_by_parent(p, plans)
    ]
    for plan_id in running:
        with (
            contextlib.suppress(run_lease.PlanBusyError),
            run_lease.holding(base_dir, plan_id, "repairing", store),
        ):
            if pause_left_running(
                store, plan_id, by="agents doctor --repair", why="no process was running it"
            ):
                repaired.append(plan_id)
    return repaired


@dataclass(frozen=True)
class FinishedApply:
    plan_id: str
    state: str
    reason: str | None


def repair_half_applied(store: Store, base_dir: Path | None = None) -> list[FinishedApply]:
    """Finish the Applies a crash stopped halfway (per their apply journal): land the
    resources that had not landed, skip those that had. Run before the left-running repair,
    which would pause them. A resource that refuses leaves its plan constrained, with the
    reason. A plan a live runner holds is left alone."""
    from cleveragents_tui.engine.run.apply_journal import half_applied
    from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions

    finished: list[FinishedApply] = []
    for stopped in half_applied(store):
        runner = PlanRunner(store, stopped.plan_id, RunOptions(sandbox_base=base_dir))
        try:
            plan = runner.apply()
        except run_lease.PlanBusyError:
            continue
        except UserError as exc:
            finished.append(FinishedApply(stopped.plan_id, "refused", str(exc)))
            continue
        reason = None
        if plan.state is not PlanState.APPLIED:
            with store.unit_of_work() as uow:
                failures = uow.events.payloads(plan.plan_id, "apply_failed")
            reason = _reason(failures[-1]) if failures else None
        finished.append(FinishedApply(plan.plan_id, plan.state.value, reason))
    return finished


def _reason(failure: dict[str, object]) -> str:
    """An ``apply_failed`` event's reason, with the fix it records (older events: in it)."""
    reason, fix = failure.get("reason"), failure.get("fix")
    return f"{reason}: {fix}" if fix else str(reason)
