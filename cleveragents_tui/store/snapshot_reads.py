"""The reads of a correction's preview snapshot (engine/correct/snapshot.py), each a
statement built once (per dialect where a set of ids is a JSON parameter) and run on the
driver's cursor of the unit of work's connection (:mod:`store.driver_reads`, issue 22).

A preview of a small affected set is a handful of small reads; through the ORM each cost
~0.1–0.3 ms of Python (the statement built, its cache key, the session's bookkeeping and row
objects) against a few microseconds of SQL, so the fixed part of a preview was 10–50× the
recursive CTE of its affected subtree. Built once and run on the driver, a read costs what
its rows do. The rows become the same domain models, through :mod:`store.mapping`.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import Select, String, bindparam, select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store import mapping
from cleveragents_tui.store.correction_queries import USER_INTERVENTION, json_ids, values_of
from cleveragents_tui.store.driver_reads import built, fetch
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


def _in(dialect: str, name: str) -> Select[tuple[str]]:
    return values_of(dialect, bindparam(name, type_=String))


@cache
def _edges(dialect: str) -> Select[Any]:
    return (
        select(_dep.upstream_decision_id, _dep.downstream_ref, _dep.dependency_type)
        .where(_dep.upstream_decision_id.in_(_in(dialect, "ids")))
        .order_by(_dep.dependency_id)
    )


@cache
def _artifacts(dialect: str) -> Select[Any]:
    return (
        select(_art.decision_id, _art.artifact_path, _art.artifact_type)
        .where(_art.decision_id.in_(_in(dialect, "ids")))
        .order_by(_art.artifact_id)
    )


@cache
def _steps(dialect: str) -> Select[Any]:
    return select(_d.sequence_number, _d.step_key, _d.decision_id, _d.chosen_option).where(
        _d.plan_id == bindparam("plan"),
        _d.superseded_by.is_(None),
        _d.step_key.in_(_in(dialect, "keys")),
    )


def decision(session: Session, decision_id: str) -> Decision:
    """The decision, whole (its row, then its edges and artifacts: three statements)."""
    found = _hydrated(session, fetch(session, _DECISION, id=decision_id))
    if not found:
        raise NotFoundError(f"decision {decision_id} does not exist", _LIST_DECISIONS)
    return found[0]


def guidance_decisions(session: Session, plan_id: str) -> list[Decision]:
    """The plan's ``user_intervention`` decisions (corrections' guidance), superseded ones
    too, in sequence order (from the plan-and-type index; one statement when there are
    none, three when there are)."""
    return _hydrated(session, fetch(session, _GUIDANCE, plan=plan_id))


def _hydrated(session: Session, rows: list[Any]) -> list[Decision]:
    if not rows:
        return []
    dialect = session.get_bind().dialect.name
    ids = json_ids(row.decision_id for row in rows)
    deps: dict[str, list[tuple[str, str]]] = {r.decision_id: [] for r in rows}
    produced: dict[str, list[tuple[str, str]]] = {r.decision_id: [] for r in rows}
    for upstream, ref, kind in fetch(session, _edges(dialect), ids=ids):
        deps[upstream].append((ref, kind))
    for decision_id, path, kind in fetch(session, _artifacts(dialect), ids=ids):
        produced[decision_id].append((path, kind))
    return [
        _decision(r, tuple(deps[r.decision_id]), tuple(produced[r.decision_id])) for r in rows
    ]


@lru_cache(maxsize=1024)
def _decision(
    row: Any, deps: tuple[tuple[str, str], ...], artifacts: tuple[tuple[str, str], ...]
) -> Decision:
    """A decision validated once per stored state (its row, edges and artifacts as read:
    a superseded one reads differently), as :func:`store.driver_reads.built` keeps rows."""
    return mapping.decision_from_row(row, deps, artifacts)


def _plan_and_action(row: Any) -> tuple[Plan, str | None, str | None]:
    return mapping.plan_from_row(row), row.definition, row.sandbox_plan_id


def plan_with_action(session: Session, plan_id: str) -> tuple[Plan, str | None, str]:
    """(the plan, its stored action's definition as stored — None without one —, the plan
    whose sandboxes it works in: its own, or its host's), in one statement."""
    found = built(session, _PLAN, _plan_and_action, plan=plan_id)
    if not found:
        raise NotFoundError(f"plan {plan_id} does not exist", _LIST_PLANS)
    plan, definition, host = found[0]
    return plan, definition, host or plan_id


def checkpoints(session: Session, plan_id: str) -> list[CheckpointMetadata]:
    """The plan's checkpoints, oldest first."""
    return built(session, _CHECKPOINTS, mapping.checkpoint_from_row, plan=plan_id)


def resources(session: Session) -> list[Resource]:
    """Every registered resource, removed ones too."""
    return built(session, _RESOURCES, mapping.resource_from_row)


def current_steps(
    session: Session, plan_id: str, keys: Collection[str]
) -> dict[str, tuple[str, str]]:
    """step key -> (decision id, chosen option) of the plan's current decisions of the steps
    ``keys`` (through the plan-and-step index), as ``DecisionRepository.current_steps``."""
    if not keys:
        return {}
    statement = _steps(session.get_bind().dialect.name)
    rows = sorted(fetch(session, statement, plan=plan_id, keys=json_ids(keys)))
    return {str(key): (decision_id, chosen) for _, key, decision_id, chosen in rows}
