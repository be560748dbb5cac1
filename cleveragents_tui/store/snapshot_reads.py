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

import json
from collections import namedtuple
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, Select, Text, bindparam, cast, func, literal_column, select, text
from sqlalchemy.sql.selectable import TextualSelect

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store import mapping
from cleveragents_tui.store.correction_queries import USER_INTERVENTION, among, strings
from cleveragents_tui.store.driver_reads import AnySelect, Read, Reads, batch, driver_rows, fetch
from cleveragents_tui.store.impact_queries import affected_statement
from cleveragents_tui.store.repositories.checkpoints import first_of_each_resource
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
# each resource's first checkpoint, not all of them: they grow with the plan's decisions
_CHECKPOINTS = (
    select(CheckpointMetadataRow.__table__)
    .where(CheckpointMetadataRow.plan_id == _ITS_PLAN, first_of_each_resource(_ITS_PLAN))
    .order_by(CheckpointMetadataRow.created_at, CheckpointMetadataRow.checkpoint_id)
)
_GROUP = (
    select(CheckpointMetadataRow.__table__)
    .where(CheckpointMetadataRow.decision_id == bindparam("id"))
    .order_by(CheckpointMetadataRow.resource_id)
)
_ITS_GUIDANCE = (
    select(DecisionRow.__table__)
    .where(_d.plan_id == _ITS_PLAN, _d.decision_type == USER_INTERVENTION)
    .order_by(_d.sequence_number)
)
_RESOURCES = select(ResourceRow.__table__)  # removed ones too: plans that used them name them
# a revert's reads of the decisions its diff compares (engine/core/replay_snapshots.py)
_NEXT_EXECUTE = (
    select(DecisionRow.__table__)
    .where(
        _d.plan_id == bindparam("plan"),
        _d.superseded_by.is_(None),
        _d.phase == "execute",
        _d.decision_type != USER_INTERVENTION,
        _d.sequence_number > bindparam("after"),
    )
    .order_by(_d.sequence_number)
    .limit(1)
)
_CORRECTING = select(DecisionRow.__table__).where(_d.corrects_decision_id == bindparam("target"))


@cache
def _edges(dialect: str) -> AnySelect:
    columns = (_dep.upstream_decision_id, _dep.downstream_ref, _dep.dependency_type)
    return select(*columns).where(among(dialect, columns[0], "ids")).order_by(_dep.dependency_id)


@cache
def _artifacts(dialect: str) -> AnySelect:
    columns = (_art.decision_id, _art.artifact_path, _art.artifact_type)
    return select(*columns).where(among(dialect, columns[0], "ids")).order_by(_art.artifact_id)


@cache
def _decisions(dialect: str) -> AnySelect:
    return select(DecisionRow.__table__).where(among(dialect, _d.decision_id, "ids"))


@cache
def _plans(dialect: str) -> AnySelect:
    return select(PlanRow.__table__).where(among(dialect, PlanRow.plan_id, "ids"))


_CURRENT_OF_PHASE = select(_d.decision_id).where(
    _d.plan_id == bindparam("plan"), _d.phase == bindparam("phase"), _d.superseded_by.is_(None)
)


@cache
def _steps(dialect: str) -> AnySelect:
    return select(_d.sequence_number, _d.step_key, _d.decision_id, _d.chosen_option).where(
        _d.plan_id == bindparam("plan"),
        _d.superseded_by.is_(None),
        among(dialect, _d.step_key, "keys"),
    )


# PostgreSQL: true when no transaction became visible between the snapshot ``kept`` and the
# statement's own but ones that were rolled back (or wrote nothing: they hold no id), so
# the two see the same rows. The ids that could have become visible are those running at
# ``kept`` and those begun since, up to the statement's; past 64 of them, or without
# ``kept``, false (read again). A write rolled back elsewhere (each ends a snapshot) then
# costs a preview nothing; any commit, to any database of the server, reads again.
_NOTHING_COMMITTED = (
    text(
        """
SELECT CASE WHEN k.s IS NULL THEN false
  WHEN c.top - k.top NOT BETWEEN 0 AND 64 THEN false
  ELSE (SELECT coalesce(bool_and(pg_xact_status(x) = 'aborted'), true) FROM (
      SELECT pg_snapshot_xip(k.s) AS x
      UNION ALL
      SELECT CAST(CAST(n AS TEXT) AS xid8) FROM generate_series(k.top, c.top - 1) AS n
    ) AS since WHERE pg_visible_in_snapshot(since.x, c.s))
  END
FROM (SELECT s, CAST(CAST(pg_snapshot_xmax(s) AS TEXT) AS BIGINT) AS top
      FROM (SELECT CAST(CAST(:kept AS TEXT) AS pg_snapshot) AS s) AS given) AS k,
     (SELECT s, CAST(CAST(pg_snapshot_xmax(s) AS TEXT) AS BIGINT) AS top
      FROM (SELECT pg_current_snapshot() AS s) AS now) AS c
"""
    )
    .bindparams(bindparam("kept", None, type_=Text))  # None: nothing kept
    .columns(literal_column("unchanged"))
)


@cache
def _decision_whole(dialect: str) -> AnySelect:
    """The decision's row with its dependency rows and artifacts (each a JSON array of
    ``[id, ...columns]``) and the database's version, in one statement: three statements
    fewer than reading them apart, each of which cost more than a small subtree's CTE on
    SQLite (issue 22).

    The version tells whether the database changed since a read on the same connection: on
    SQLite the rows this connection changed and the count of other connections' commits
    (``data_version``, as of the snapshot), on PostgreSQL the snapshot itself (it differs
    once any transaction that wrote has ended) and whether any transaction committed since
    the snapshot ``kept`` (:data:`_NOTHING_COMMITTED`)."""

    def json_rows(*columns: Any) -> Any:  # as text: the row is hashed (:func:`_decision`)
        if dialect == "postgresql":
            return cast(func.json_agg(func.json_build_array(*columns)), Text)
        return func.json_group_array(func.json_array(*columns))

    edges = select(json_rows(_dep.dependency_id, _dep.downstream_ref, _dep.dependency_type)).where(
        _dep.upstream_decision_id == _d.decision_id
    )
    artifacts = select(json_rows(_art.artifact_id, _art.artifact_path, _art.artifact_type)).where(
        _art.decision_id == _d.decision_id
    )
    version: tuple[Any, ...] = (
        (cast(func.pg_current_snapshot(), Text), _NOTHING_COMMITTED)
        if dialect == "postgresql"
        else (
            func.total_changes(),
            select(literal_column("data_version")).select_from(text("pragma_data_version")),
        )
    )
    return select(
        DecisionRow.__table__,
        edges.scalar_subquery().label("edges_json"),
        artifacts.scalar_subquery().label("artifacts_json"),
        *(
            (v.scalar_subquery() if isinstance(v, Select | TextualSelect) else v).label(
                f"version_{n}"
            )
            for n, v in enumerate(version)
        ),
    ).where(_d.decision_id == bindparam("id"))


_VERSION = len(DecisionRow.__table__.columns) + 2  # the first version column of the row


def _json_rows(decision_id: str, value: str | None) -> list[tuple[str, str, str]]:
    """(decision, column, column) of the JSON array :func:`_decision_whole` gives, in the
    order of their ids (as the rows were inserted)."""
    found = json.loads(value) if value is not None else []  # PostgreSQL: NULL for none
    return [(decision_id, a, b) for _, a, b in sorted(found, key=lambda row: row[0])]


def _whole(row: Any) -> tuple[Decision, tuple[Any, ...]]:
    """(the decision, the database's version) of :func:`_decision_whole`'s row, built once
    per row as read (store/driver_reads.py keeps them by the driver's row: its columns'
    values converted, its JSON arrays parsed and the model looked up cost more than the
    statement, issue 22). The decision is kept by its own columns, without the version:
    a write anywhere in the store changes the version, not the decision, and validating
    the model again was half of a cold preview's extra time on SQLite."""
    return _whole_decision(tuple(row[:_VERSION]), row._fields[:_VERSION]), tuple(row[_VERSION:])


@lru_cache(maxsize=1024)
def _whole_decision(head: tuple[Any, ...], names: tuple[str, ...]) -> Decision:
    """The decision of :func:`_decision_whole`'s columns ``names`` (all but the version)."""
    row = _head_row(names)._make(head)
    decision_id = row.decision_id
    edges = _json_rows(decision_id, row.edges_json)
    artifacts = _json_rows(decision_id, row.artifacts_json)
    return mapping.decisions_from_rows([row], edges, artifacts, _decision)[0]


@cache
def _head_row(names: tuple[str, ...]) -> Any:
    return namedtuple("DecisionWhole", names)


# the plan-level reads of a decision's plan: (plan, stored action, host, checkpoints,
# resources, guidance rows), as :func:`basics` reads them
PlanReads = tuple[Plan, str | None, str, list[CheckpointMetadata], list[Resource], list[Any]]


@dataclass
class _Kept:
    """The plan-level reads made at one version of the database."""

    owner: Any  # what they were read through: the driver's connection, or the engine
    version: Any
    plans: dict[str, PlanReads] = field(default_factory=dict)
    steps: dict[tuple[str, frozenset[str]], dict[str, tuple[str, str]]] = field(
        default_factory=dict
    )
    derived: dict[Any, Any] = field(default_factory=dict)  # Basics.derived


_KEPT = "cleveragents_tui.snapshot_reads"  # in a SQLite connection's pool record's info
_BY_ENGINE: WeakKeyDictionary[Engine, _Kept] = WeakKeyDictionary()  # PostgreSQL's


def _kept(session: Reads, version: Any, since: str | None = None) -> _Kept:
    """The kept reads, emptied when the database changed since they were read. SQLite's
    version is the connection's (kept in its pool record, with the driver's connection:
    a new one behind the record starts empty); PostgreSQL's snapshot is the server's,
    the same through every connection of the engine: reads kept at the snapshot ``since``
    stay, under the new one, when nothing was committed between the two (``version``'s
    second part, :data:`_NOTHING_COMMITTED`)."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        engine = connection.engine
        kept = _BY_ENGINE.get(engine)
        if kept is not None and kept.version != version:
            if since is not None and version[1] and kept.version[0] == since:
                kept.version = version  # the same rows seen: the reads stand
            else:
                kept = None
        if kept is None:
            kept = _BY_ENGINE[engine] = _Kept(engine, version)
        return kept
    record = connection.connection
    driver = record.dbapi_connection
    kept = record.info.get(_KEPT)
    if kept is None or kept.owner is not driver or kept.version != version:
        kept = record.info[_KEPT] = _Kept(driver, version)
    return kept


def _since(session: Reads) -> str | None:
    """PostgreSQL: the snapshot the engine's kept reads were read at, if any."""
    kept = _BY_ENGINE.get(session.connection().engine)
    return None if kept is None else str(kept.version[0])


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
    version: Any  # of the database as read (:func:`current_steps` keeps its reads by it)
    refs: frozenset[str] | None  # the rows of the decision's affected-subtree CTE, if asked
    # what a caller works out from the plan-level reads (and the database as read) alone,
    # kept by the caller's key with those reads, and emptied with them
    derived: dict[Any, Any]


def basics(session: Reads, decision_id: str, subtree: bool = False) -> Basics:
    """The decision, whole, its plan with its stored action and host, each resource's first
    checkpoint in the plan, its guidance decisions' rows, and every resource; with ``subtree`` the rows
    of its affected-subtree CTE (store/impact_queries.py) too.

    The plan-level reads are kept per connection until the database changes, and read only
    when not kept (issue 22: a preview reads the same plan again and again as the user
    picks decisions, and each statement cost more than the CTE of a small subtree): then
    they are a second batch, a second round trip on PostgreSQL."""
    dialect = session.get_bind().dialect.name
    one = {"id": decision_id}
    since = _since(session) if dialect == "postgresql" else None
    whole = {**one, "kept": since} if dialect == "postgresql" else one
    reads: list[Read] = [(_decision_whole(dialect), _whole, whole)]
    if subtree:
        reads.append((affected_statement(dialect), driver_rows, {"target": decision_id}))
    plan_level: list[Read] = [
        (_PLAN, _plan_and_action, one),
        (_CHECKPOINTS, mapping.checkpoint_from_row, one),
        (_RESOURCES, mapping.resource_from_row, {}),
        (_ITS_GUIDANCE, None, one),
    ]
    found = batch(session, reads)
    rows = found[0]
    refs = frozenset(row[0] for row in found[1]) if subtree else None
    if not rows:
        raise NotFoundError(f"decision {decision_id} does not exist", _LIST_DECISIONS)
    decision, version = rows[0]
    kept = _kept(session, version, since)
    plan_id = decision.plan_id
    read = kept.plans.get(plan_id)
    if read is None:
        keys = _STEP_KEYS.get(plan_id)
        if keys:  # the steps asked last time, in the same round trip (:func:`current_steps`)
            plan_level.append((_steps(dialect), None, _steps_params(session, plan_id, keys)))
        plans, checkpoints, resources, guidance, *steps = batch(session, plan_level)
        if keys and steps:
            kept.steps[(plan_id, keys)] = _steps_of(steps[0])
        if not plans:
            raise NotFoundError(f"plan {plan_id} does not exist", _LIST_PLANS)
        plan, definition, host = plans[0]
        read = kept.plans[plan_id] = (
            plan, definition, host or plan.plan_id, checkpoints, resources, guidance
        )  # fmt: skip
    plan, definition, host, checkpoints, resources, guidance = read
    return Basics(
        decision=decision,
        plan=plan,
        definition=definition,
        host_plan_id=host,
        checkpoints=checkpoints,
        resources=resources,
        guidance=guidance,
        version=kept.version,
        refs=refs,
        derived=kept.derived,
    )


def next_execute_decision(session: Reads, plan_id: str, after: int) -> list[Decision]:
    """The plan's first current Execute decision recorded after sequence number ``after``
    that was made in a state of its own (not a correction's guidance): none or one."""
    return hydrated(session, fetch(session, _NEXT_EXECUTE, plan=plan_id, after=after))


def correcting(session: Reads, plan_id: str, target: str) -> list[Decision]:
    """The plan's decisions that correct ``target`` (its guidance, the decisions re-made in
    its place), in sequence order. Found by the corrections' index (migration 0012); the
    plan is compared here: given it, SQLite walks every decision of the plan instead."""
    rows = fetch(session, _CORRECTING, target=target)
    return hydrated(
        session, sorted((r for r in rows if r.plan_id == plan_id), key=lambda r: r.sequence_number)
    )


def checkpoint_group(session: Reads, decision_id: str) -> list[CheckpointMetadata]:
    """The checkpoints of the decision's group, by resource (as checkpoints.for_decision)."""
    return batch(session, [(_GROUP, mapping.checkpoint_from_row, {"id": decision_id})])[0]


def guidance_decisions(session: Reads, plan_id: str) -> list[Decision]:
    """The plan's ``user_intervention`` decisions (corrections' guidance), superseded ones
    too, in sequence order (from the plan-and-type index; one statement when there are
    none, three when there are)."""
    return hydrated(session, fetch(session, _GUIDANCE, plan=plan_id))


def hydrated(session: Reads, rows: list[Any]) -> list[Decision]:
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
    session: Reads, plan_id: str, keys: Collection[str], version: Any = None
) -> dict[str, tuple[str, str]]:
    """step key -> (decision id, chosen option) of the plan's current decisions of the steps
    ``keys`` (through the plan-and-step index), as ``DecisionRepository.current_steps``;
    kept with :func:`basics`' reads when given their ``version``."""
    if not keys:
        return {}
    kept = _kept(session, version) if version is not None else None
    key = (plan_id, frozenset(keys))
    if kept is not None:
        if len(_STEP_KEYS) >= _STEP_KEYS_KEPT and plan_id not in _STEP_KEYS:
            _STEP_KEYS.clear()
        _STEP_KEYS[plan_id] = key[1]
        if key in kept.steps:
            return kept.steps[key]
    statement = _steps(session.get_bind().dialect.name)
    steps = _steps_of(fetch(session, statement, **_steps_params(session, plan_id, key[1])))
    if kept is not None:
        kept.steps[key] = steps
    return steps


# plan -> the step keys its current steps were last asked for (its stored action's, which
# never change): read with the plan-level reads when those are read again (one round trip
# fewer on PostgreSQL); a guess checked by its keys, as current_steps keeps its reads
_STEP_KEYS: dict[str, frozenset[str]] = {}
_STEP_KEYS_KEPT = 256


def _steps_params(session: Reads, plan_id: str, keys: frozenset[str]) -> dict[str, Any]:
    return {"plan": plan_id, "keys": strings(session, sorted(keys))}


def _steps_of(rows: list[Any]) -> dict[str, tuple[str, str]]:
    """step key -> (decision id, chosen option) of :func:`_steps`' rows: the last current
    decision of a step by sequence number, as before."""
    return {str(key): (decision_id, chosen) for _, key, decision_id, chosen in sorted(rows)}


def decisions(session: Reads, decision_ids: Collection[str]) -> dict[str, Decision]:
    """These decisions by id, whole (three statements; none for no ids)."""
    if not decision_ids:
        return {}
    statement = _decisions(session.get_bind().dialect.name)
    rows = fetch(session, statement, ids=strings(session, decision_ids))
    return {d.decision_id: d for d in hydrated(session, rows)}


def plans(session: Reads, plan_ids: Collection[str]) -> dict[str, Plan]:
    """These plans by id (one statement; none for no ids)."""
    if not plan_ids:
        return {}
    statement = _plans(session.get_bind().dialect.name)
    found = fetch(session, statement, ids=strings(session, plan_ids))
    return {plan.plan_id: plan for plan in map(mapping.plan_from_row, found)}


def current_decision_ids(session: Reads, plan_id: str, phase: str) -> set[str]:
    """The plan's current decisions of one phase."""
    return {row[0] for row in fetch(session, _CURRENT_OF_PHASE, plan=plan_id, phase=phase)}
