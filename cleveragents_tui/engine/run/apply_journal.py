"""Apply as a durable, resumable protocol (docs/reliability.md, "Apply is a journal").

An Apply lands a plan's sandboxes on the real resources one after the other. Before each
step the journal in the store says what is about to happen: every resource is ``planned``
(one transaction, before anything lands), then ``landing`` just before its sandbox's
``apply()`` runs, then ``landed`` with what landing left on the real resource:

- git worktree: the apply branch and its commit;
- filesystem copy and overlay: every path the Apply wrote or removed, with the SHA-256 of the
  file now there (None: removed; ``dir:``/``link:`` for folders and symbolic links);
- database sandboxes: ``committed`` (the sandbox records its own commit before it returns);
- none: nothing (its changes went straight to the resource).

A crash leaves at most one resource ``landing``. A rerun (``agents plan run``/``apply``, or
``agents doctor --repair``) skips what ``landed`` and lands the rest again: every sandbox's
``apply()`` is idempotent and takes the plan's own landed content for what it is, not for a
change someone made since the sandbox was made.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.apply_journal import ApplyStep, ApplyStepState
from cleveragents_tui.domain.enums import Phase, PlanState, SandboxStrategyName
from cleveragents_tui.sandbox.base import ApplyResult, ChangeKind, Sandbox
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

_FILE_STRATEGIES = (SandboxStrategyName.FILESYSTEM_COPY, SandboxStrategyName.OVERLAY)


class ApplyJournal:
    """The journal of one Apply: a plan's attempt. Each method commits what it writes."""

    def __init__(self, store: Store, plan_id: str, attempt: int) -> None:
        self._store = store
        self.plan_id = plan_id
        self.attempt = attempt

    def plan(self, resources: Sequence[tuple[str, SandboxStrategyName]]) -> list[ApplyStep]:
        """Every resource ``planned`` (those a crashed run journaled keep their state)."""
        with self._store.unit_of_work(write=True) as uow:
            uow.apply_journal.plan(
                self.plan_id, self.attempt, [(rid, s.value) for rid, s in resources]
            )
            uow.commit()
            return uow.apply_journal.for_apply(self.plan_id, self.attempt)

    def landing(self, resource_id: str) -> None:
        self._mark(resource_id, ApplyStepState.LANDING, None)

    def refused(self, resource_id: str) -> None:
        """Back to ``planned``: the resource refused before anything landed."""
        self._mark(resource_id, ApplyStepState.PLANNED, None)

    def landed(self, resource_id: str, landed: dict[str, Any]) -> None:
        self._mark(resource_id, ApplyStepState.LANDED, landed)

    def _mark(self, resource_id: str, state: ApplyStepState, landed: dict[str, Any] | None) -> None:
        with self._store.unit_of_work(write=True) as uow:
            uow.apply_journal.mark(self.plan_id, self.attempt, resource_id, state, landed)
            uow.commit()


def landed_record(sandbox: Sandbox, host_plan_id: str, result: ApplyResult) -> dict[str, Any]:
    """What landing ``sandbox`` left on its real resource, read back from the resource."""
    resource = sandbox.resource
    strategy = resource.sandbox_strategy
    record: dict[str, Any] = {"summary": result.summary, "changes": len(result.changes)}
    if strategy is SandboxStrategyName.GIT_WORKTREE:
        branch = f"refs/heads/cleveragents/apply/{host_plan_id}"
        record["branch"] = branch
        record["commit"] = _git_ref(Path(resource.location), branch) if result.changes else None
    elif strategy in _FILE_STRATEGIES:
        real = Path(resource.location)
        record["files"] = {
            change.path: None
            if change.kind is ChangeKind.DELETED
            else file_fingerprint(real / change.path)
            for change in result.changes
        }
    elif strategy is SandboxStrategyName.TRANSACTION_ROLLBACK:
        record["database"] = "committed"
    return record


def file_fingerprint(path: Path) -> str | None:
    """What is at ``path``: ``sha256:<hex>`` of a file, ``link:<target>``, ``dir:``, or None."""
    import hashlib

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"link:{os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return "dir:"
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def _git_ref(repository: Path, ref: str) -> str | None:
    found = subprocess.run(
        ["git", "-C", str(repository), "rev-parse", "--verify", "-q", ref],
        capture_output=True,
        text=True,
        check=False,
        process_group=0,  # an Apply goes on after a first Ctrl+C: the terminal's is not git's
    )
    return found.stdout.strip() or None


def landing_began(store: Store, plan_id: str) -> set[str]:
    """The resources whose landing the plan's current Apply has begun (``landing`` or
    ``landed`` in its journal): their sandboxes may have gone with the landing (a committed
    database, a removed worktree), which is the Apply's doing, not a lost checkpoint."""
    with store.unit_of_work() as uow:
        attempt = uow.plans.get(plan_id).attempt
        return {
            step.resource_id
            for step in uow.apply_journal.for_apply(plan_id, attempt)
            if step.state is not ApplyStepState.PLANNED
        }


@dataclass(frozen=True)
class HalfApplied:
    """A plan whose Apply a crash (or a refusal) stopped after some resource began landing."""

    plan_id: str
    attempt: int
    state: PlanState
    landed: tuple[str, ...]
    unfinished: tuple[str, ...]

    @property
    def message(self) -> str:
        done = ", ".join(self.landed) or "none"
        if not self.unfinished:
            return (
                f"plan {self.plan_id} is apply · {self.state.value}: every resource landed "
                f"({done}), but the plan was not marked applied"
            )
        return (
            f"plan {self.plan_id} is half-applied (apply · {self.state.value}): landed "
            f"{done}; not yet {', '.join(self.unfinished)}"
        )


def _landed_below(uow: UnitOfWork, plan_id: str) -> tuple[str, ...]:
    """The resources the child plans of ``plan_id`` (and theirs) journaled ``landed`` in
    their current attempts: landed by the same Apply."""
    landed: list[str] = []
    for child in uow.plans.children(plan_id):
        steps = uow.apply_journal.for_apply(child.plan_id, child.attempt)
        landed += [s.resource_id for s in steps if s.state is ApplyStepState.LANDED]
        landed += _landed_below(uow, child.plan_id)
    return tuple(landed)


def half_applied(store: Store) -> list[HalfApplied]:
    """Plans stopped in Apply (not applied) with a resource landing or landed and another not,
    per the apply journal: some real resources hold the plan's result, others not. A child
    plan's sandboxes land in its parent's Apply: its entries count for the parent."""
    found: dict[str, HalfApplied] = {}
    with store.unit_of_work() as uow:
        for step in uow.apply_journal.unfinished():
            plan = uow.plans.get(step.plan_id)
            if plan.attempt != step.attempt or plan.state in (
                PlanState.APPLIED,
                PlanState.CANCELLED,
            ):
                continue
            subject = plan
            while subject.phase is not Phase.APPLY and subject.parent_plan_id is not None:
                subject = uow.plans.get(subject.parent_plan_id)
            if subject.phase is not Phase.APPLY or subject.state in (
                PlanState.APPLIED,
                PlanState.CANCELLED,
            ):
                continue
            every = uow.apply_journal.for_apply(step.plan_id, step.attempt)
            if all(s.state is ApplyStepState.PLANNED for s in every):
                continue
            known = found.get(subject.plan_id)
            landed = tuple(s.resource_id for s in every if s.state is ApplyStepState.LANDED)
            if known is not None:
                if step.resource_id in known.unfinished:
                    continue
                landed = tuple(dict.fromkeys(known.landed + landed))
            found[subject.plan_id] = HalfApplied(
                subject.plan_id,
                subject.attempt,
                subject.state,
                landed,
                (*(known.unfinished if known else ()), step.resource_id),
            )
        for plan_id, known in list(found.items()):  # what its child plans' journals landed
            landed = known.landed + _landed_below(uow, plan_id)
            found[plan_id] = replace(known, landed=tuple(dict.fromkeys(landed)))
        # Every resource landed, the plan not yet marked applied (killed in between).
        for plan in uow.plans.all():
            if plan.plan_id in found or plan.phase is not Phase.APPLY:
                continue
            if plan.state in (PlanState.APPLIED, PlanState.CANCELLED):
                continue
            every = uow.apply_journal.for_apply(plan.plan_id, plan.attempt)
            if every and all(s.state is ApplyStepState.LANDED for s in every):
                landed = tuple(s.resource_id for s in every)
                found[plan.plan_id] = HalfApplied(
                    plan.plan_id, plan.attempt, plan.state, landed, ()
                )
    return list(found.values())
