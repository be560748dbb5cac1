"""The reads of a correction's preview snapshot (engine/correct/snapshot.py), each a
statement built once, at import, and run on the unit of work's connection (issue 22).

A preview of a small affected set is a handful of small reads; through the ORM each cost
~0.1–0.3 ms of Python (the statement built, its cache key, the session's bookkeeping and row
objects) against a few microseconds of SQL, so the fixed part of a preview was 10–50× the
recursive CTE of its affected subtree. Built once and run on Core, a read costs what its rows
do. The rows become the same domain models, through :mod:`store.mapping`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import NotFoundError, StoreCorruptedError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store import mapping
from cleveragents_tui.store.correction_queries import USER_INTERVENTION
from cleveragents_tui.store.tables import (
    CheckpointMetadataRow,
    DecisionArtifactRow,
    DecisionDependencyRow,
    DecisionRow,
    PlanActionRow,
    PlanRow,
    ResourceRow,
)

_LIST_DECISIONS = "see a plan's decisions with `agents plan tree PLAN`"  # as the repositories
_LIST_PLANS = "list plans with `agents plan list`"
_d, _dep, _art = DecisionRow, DecisionDependencyRow, DecisionArtifactRow

_DECISION = select(DecisionRow.__table__).where(_d.decision_id == bindparam("id"))
_GUIDANCE = (
    select(DecisionRow.__table__)
    .where(_d.plan_id == bindparam("plan"), _d.decision_type == USER_INTERVENTION)
    .order_by(_d.sequence_number)
)
_EDGES = (
    select(_dep.upstream_decision_id, _dep.downstream_ref, _dep.dependency_type)
    .where(_dep.upstream_decision_id.in_(bindparam("ids", expanding=True)))
    .order_by(_dep.dependency_id)
)
_ARTIFACTS = (
    select(_art.decision_id, _art.artifact_path, _art.artifact_type)
    .where(_art.decision_id.in_(bindparam("ids", expanding=True)))
    .order_by(_art.artifact_id)
)
_PLAN = (
    select(PlanRow.__table__, PlanActionRow.definition, PlanActionRow.sandbox_plan_id)
    .outerjoin_from(PlanRow, PlanActionRow, PlanActionRow.plan_id == PlanRow.plan_id)
    .where(PlanRow.plan_id == bindparam("plan"))
)
_CHECKPOINTS = (
    select(CheckpointMetadataRow.__table__)
    .where(CheckpointMetadataRow.plan_id == bindparam("plan"))
    .order_by(CheckpointMetadataRow.created_at, CheckpointMetadataRow.checkpoint_id)
)
_RESOURCES = select(ResourceRow.__table__)  # removed ones too: plans that used them name them
_STEPS = select(_d.sequence_number, _d.step_key, _d.decision_id, _d.chosen_option).where(
    _d.plan_id == bindparam("plan"),
    _d.superseded_by.is_(None),
    _d.step_key.is_not(None),
    _d.step_key.in_(bindparam("keys", expanding=True)),
)


def decision(session: Session, decision_id: str) -> Decision:
    """The decision, whole (its row, then its edges and artifacts: three statements)."""
    found = _hydrated(session, list(_run(session, _DECISION, id=decision_id)))
    if not found:
        raise NotFoundError(f"decision {decision_id} does not exist", _LIST_DECISIONS)
    return found[0]


def guidance_decisions(session: Session, plan_id: str) -> list[Decision]:
    """The plan's ``user_intervention`` decisions (corrections' guidance), superseded ones
    too, in sequence order (from the plan-and-type index; one statement when there are
    none, three when there are)."""
    return _hydrated(session, list(_run(session, _GUIDANCE, plan=plan_id)))


def _hydrated(session: Session, rows: list[Any]) -> list[Decision]:
    if not rows:
        return []
    ids = [row.decision_id for row in rows]
    edges = list(_run(session, _EDGES, ids=ids))  # read before the next statement runs
    return mapping.decisions_from_rows(rows, edges, _run(session, _ARTIFACTS, ids=ids))


def plan_with_action(session: Session, plan_id: str) -> tuple[Plan, dict[str, object] | None, str]:
    """(the plan, its stored action's definition — None without one, or when it is not a
    JSON object —, the plan whose sandboxes it works in: its own, or its host's), in one
    statement."""
    row = _run(session, _PLAN, plan=plan_id).first()
    if row is None:
        raise NotFoundError(f"plan {plan_id} does not exist", _LIST_PLANS)
    definition = None
    if row.definition is not None:
        with contextlib.suppress(StoreCorruptedError):  # as a plan without one
            definition = mapping.load_json("plan_actions", plan_id, "definition", row.definition)
    return (
        mapping.plan_from_row(row),
        definition if isinstance(definition, dict) else None,
        row.sandbox_plan_id or plan_id,
    )


def checkpoints(session: Session, plan_id: str) -> list[CheckpointMetadata]:
    """The plan's checkpoints, oldest first."""
    return [mapping.checkpoint_from_row(r) for r in _run(session, _CHECKPOINTS, plan=plan_id)]


def resources(session: Session) -> list[Resource]:
    """Every registered resource, removed ones too."""
    return [mapping.resource_from_row(r) for r in _run(session, _RESOURCES)]


def current_steps(
    session: Session, plan_id: str, keys: Collection[str]
) -> dict[str, tuple[str, str]]:
    """step key -> (decision id, chosen option) of the plan's current decisions of the steps
    ``keys`` (through the plan-and-step index), as ``DecisionRepository.current_steps``."""
    if not keys:
        return {}
    rows = sorted(_run(session, _STEPS, plan=plan_id, keys=sorted(keys)))
    return {str(key): (decision_id, chosen) for _, key, decision_id, chosen in rows}


def _run(session: Session, statement: Any, **params: Any) -> Any:
    return session.connection().execute(statement, params)
