"""The invariants of the records alone: each check reads the loaded snapshot and adds what is
broken (docs/reliability.md, "The invariant checker", says what each checks and cannot see)."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CheckpointGroupStatus,
    CorrectionMode,
    CorrectionStatus,
    DecisionType,
    Phase,
    PlanState,
)
from cleveragents_tui.engine.ops.invariant_findings import Findings, Stored


def _pending_groups(stored: Stored, found: Findings) -> None:
    found.examined("pending-group", len(stored.groups))
    for group in stored.groups:
        if group.status is CheckpointGroupStatus.PENDING:
            found.add(
                "pending-group",
                group.group_id,
                f"checkpoint group of plan {group.plan_id} was left pending by a crash",
            )


def _execute_groups(stored: Stored, found: Findings) -> None:
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


def _append_only(stored: Stored, found: Findings) -> None:
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


def _context_hashes(stored: Stored, found: Findings) -> None:
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


def _current_trees(stored: Stored, found: Findings) -> None:
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


def _superseded_by(stored: Stored, found: Findings) -> None:
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


def _applied_unchanged(stored: Stored, found: Findings) -> None:
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


def _corrections_finished(stored: Stored, found: Findings) -> None:
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


RECORD_CHECKS: tuple[Callable[[Stored, Findings], None], ...] = (
    _pending_groups,
    _execute_groups,
    _append_only,
    _context_hashes,
    _current_trees,
    _superseded_by,
    _applied_unchanged,
    _corrections_finished,
)
