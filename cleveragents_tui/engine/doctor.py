"""``agents doctor``: check the store and the sandboxes for broken invariants (like git fsck).

Checks: checkpoint groups left pending by a crash; committed groups without a decision;
every live checkpoint of a plan still in progress exists in its sandbox (git objects,
archive objects, savepoints); lock files left behind in sandboxes and in our git worktrees.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.sandboxes import PlanSandboxes, sandbox_base_dir
from cleveragents_tui.store.store import Store

STALE_LOCK_SECONDS = 600


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


def run_checks(store: Store, base_dir: Path | None = None) -> DoctorReport:
    base = base_dir or sandbox_base_dir()
    problems: list[Problem] = []
    with store.unit_of_work() as uow:
        pending = uow.checkpoints.pending_groups()
        plans = {p.plan_id: p for p in uow.plans.all()}
        live = uow.checkpoints.all_live()
        groups = [g for plan_id in plans for g in uow.checkpoints.groups_for_plan(plan_id)]
        resources = {r.resource_id: r for r in uow.resources.all()}
    for group, refs in pending:
        problems.append(
            Problem(
                "pending-group",
                group.group_id,
                f"checkpoint group of plan {group.plan_id} was left pending by a crash "
                f"({len(refs)} checkpoint(s) made)",
                "run `agents doctor --repair` to drop them",
            )
        )
    for group in groups:
        if group.status == "committed" and group.decision_id is None:
            problems.append(
                Problem(
                    "group-without-decision",
                    group.group_id,
                    "committed group has no decision",
                    "restore the database from a backup",
                )
            )
    verified = _verify_checkpoints(store, base, plans, live, problems)
    problems.extend(
        _stale_locks(
            base,
            [
                r.location
                for r in resources.values()
                if r.sandbox_strategy is SandboxStrategyName.GIT_WORKTREE
            ],
        )
    )
    return DoctorReport(problems, verified)


def _verify_checkpoints(
    store: Store,
    base: Path,
    plans: dict[str, Plan],
    live: list[CheckpointMetadata],
    problems: list[Problem],
) -> int:
    by_plan: dict[str, list[CheckpointMetadata]] = defaultdict(list)
    for checkpoint in live:
        if checkpoint.rollbackable:
            by_plan[checkpoint.plan_id].append(checkpoint)
    verified = 0
    for plan_id, checkpoints in by_plan.items():
        plan = plans.get(plan_id)
        if plan is None or plan.state.is_terminal:
            continue  # applied or cancelled plans may have discarded their sandboxes
        sandboxes = PlanSandboxes(store, plan_id, base)
        for checkpoint in checkpoints:
            try:
                sandboxes.get(checkpoint.resource_id).verify(checkpoint.ref)
                verified += 1
            except UserError as exc:
                problems.append(
                    Problem(
                        "checkpoint-missing",
                        f"{checkpoint.resource_id}@{checkpoint.checkpoint_id}",
                        f"plan {plan_id}: {exc}",
                        "corrections cannot roll back to this checkpoint; restore the sandbox "
                        "folder from a backup or correct with --mode=append",
                    )
                )
    return verified


def _stale_locks(base: Path, git_repositories: list[str]) -> list[Problem]:
    places = [base] + [Path(repo) / ".git" / "worktrees" for repo in git_repositories]
    now = time.time()
    problems = []
    for place in places:
        if not place.is_dir():
            continue
        for lock in place.rglob("*.lock"):
            try:
                age = now - lock.lstat().st_mtime
            except OSError:
                continue
            if age > STALE_LOCK_SECONDS:
                problems.append(
                    Problem(
                        "stale-lock",
                        str(lock),
                        f"lock file left behind {int(age // 60)} minutes ago",
                        "make sure no agents or git process is running, then delete it",
                    )
                )
    return problems
