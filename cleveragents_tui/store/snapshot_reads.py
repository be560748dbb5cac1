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
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store import mapping
from cleveragents_tui.store.correction_queries import USER_INTERVENTION, among, strings
from cleveragents_tui.store.driver_reads import AnySelect, batch, fetch
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
# the decision's plan, looked up in the statement: the plan-level reads go with the
# decision's, in one round trip on PostgreSQL (store/driver_reads.batch)
_ITS_PLAN = select(_d.plan_id).where(_d.decision_id == bindparam("id")).scalar_subquery()
_PLAN = (
    select(PlanRow.__table__, PlanActionRow.definition, PlanActionRow.sandbox_plan_id)
    .outerjoin_from(PlanRow, PlanActionRow, PlanActionRow.plan_id == PlanRow.plan_id)
    .where(PlanRow.plan_id == _ITS_PLAN)
)
_CHECKPOINTS = (
    select(CheckpointMetadataRow.__table__)
    .where(CheckpointMetadataRow.plan_id == _ITS_PLAN)
    .order_by(CheckpointMetadataRow.created_at, CheckpointMetadataRow.checkpoint_id)
)
_ITS_GUIDANCE = (
    select(DecisionRow.__table__)
    .where(_d.plan_id == _ITS_PLAN, _d.decision_type == USER_INTERVENTION)
    .order_by(_d.sequence_number)
)
_RESOURCES = select(ResourceRow.__table__)  # removed ones too: plans that used them name them


@cache
def _edges(dialect: str) -> AnySelect:
    columns = (_dep.upstream_decision_id, _dep.downstream_ref, _dep.dependency_type)
    return select(*columns).where(among(dialect, columns[0], "ids")).order_by(_dep.dependency_id)


@cache
def _artifacts(dialect: str) -> AnySelect:
    columns = (_art.decision_id, _art.artifact_path, _art.artifact_type)
    return select(*columns).where(among(dialect, columns[0], "ids")).order_by(_art.artifact_id)


@cache
def _steps(dialect: str) -> AnySelect:
    return select(_d.sequence_number, _d.step_key, _d.decision_id, _d.chosen_option).where(
        _d.plan_id == bindparam("plan"),
        _d.superseded_by.is_(None),
        among(dialect, _d.step_key, "keys"),
    )


@dataclass(frozen=True)
class Basics:
    """What every correction of a decision is checked against, read together."""

    decision: Decision
    plan: Plan
    definition: str | None  # the plan's stored action, as stored; None without one
    host_plan_id: str  # whose sandboxes the plan works in: its own, or its host's
    checkpoints: list[CheckpointMetadata]  # the plan's, oldest first
    resources: list[Resource]  # every registered one, removed ones too
    guidance: list[Any]  # the rows of the plan's guidance decisions (:func:`hydrated`)


def basics(session: Session, decision_id: str) -> Basics:
    """The decision, whole, its plan with its stored action and host, the plan's
    checkpoints and guidance decisions' rows, and every resource: seven statements, sent
    together (one round trip on PostgreSQL)."""
    ids = strings(session, [decision_id])
    dialect = session.get_bind().dialect.name
    rows, edges, artifacts, plans, checkpoints, resources, guidance = batch(
        session,
        [
            (_DECISION, None, {"id": decision_id}),
            (_edges(dialect), None, {"ids": ids}),
            (_artifacts(dialect), None, {"ids": ids}),
            (_PLAN, _plan_and_action, {"id": decision_id}),
            (_CHECKPOINTS, mapping.checkpoint_from_row, {"id": decision_id}),
            (_RESOURCES, mapping.resource_from_row, {}),
            (_ITS_GUIDANCE, None, {"id": decision_id}),
        ],
    )
    if not rows:
        raise NotFoundError(f"decision {decision_id} does not exist", _LIST_DECISIONS)
    if not plans:
        raise NotFoundError(f"plan {rows[0].plan_id} does not exist", _LIST_PLANS)
    plan, definition, host = plans[0]
    return Basics(
        decision=mapping.decisions_from_rows(rows, edges, artifacts, _decision)[0],
        plan=plan,
        definition=definition,
        host_plan_id=host or plan.plan_id,
        checkpoints=checkpoints,
        resources=resources,
        guidance=guidance,
    )


def guidance_decisions(session: Session, plan_id: str) -> list[Decision]:
    """The plan's ``user_intervention`` decisions (corrections' guidance), superseded ones
    too, in sequence order (from the plan-and-type index; one statement when there are
    none, three when there are)."""
    return hydrated(session, fetch(session, _GUIDANCE, plan=plan_id))


def hydrated(session: Session, rows: list[Any]) -> list[Decision]:
    """Decision rows (as :class:`Basics` has the guidance's) as decisions, whole: their
    edges and artifacts read (two statements; none for no rows)."""
    if not rows:
        return []
    dialect = session.get_bind().dialect.name
    ids = strings(session, (row.decision_id for row in rows))
    edges, artifacts = batch(
        session,
        [(_edges(dialect), None, {"ids": ids}), (_artifacts(dialect), None, {"ids": ids})],
    )
    return mapping.decisions_from_rows(rows, edges, artifacts, _decision)


@lru_cache(maxsize=1024)
def _decision(
    row: Any, deps: tuple[tuple[str, str], ...], artifacts: tuple[tuple[str, str], ...]
) -> Decision:
    """A decision validated once per stored state (its row, edges and artifacts as read:
    a superseded one reads differently), as :func:`store.driver_reads.batch` keeps built rows."""
    return mapping.decision_from_row(row, deps, artifacts)


def _plan_and_action(row: Any) -> tuple[Plan, str | None, str | None]:
    return mapping.plan_from_row(row), row.definition, row.sandbox_plan_id


def current_steps(
    session: Session, plan_id: str, keys: Collection[str]
) -> dict[str, tuple[str, str]]:
    """step key -> (decision id, chosen option) of the plan's current decisions of the steps
    ``keys`` (through the plan-and-step index), as ``DecisionRepository.current_steps``."""
    if not keys:
        return {}
    statement = _steps(session.get_bind().dialect.name)
    rows = sorted(fetch(session, statement, plan=plan_id, keys=strings(session, keys)))
    return {str(key): (decision_id, chosen) for _, key, decision_id, chosen in rows}
