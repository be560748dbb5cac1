"""The set-based SQL of a correction's preview and execute (engine/correct/): each read
or write of the affected decisions, or of their tool calls, is one statement whatever the
number of decisions, so the cost of a correction does not grow in round trips with the plan.

A set of ids travels as ONE bound parameter, a JSON array the database unpacks
(``json_each`` on SQLite, ``jsonb_array_elements_text`` on PostgreSQL): an ``IN`` list would
need one placeholder per id, which SQLite caps (32,766) and which the repositories therefore
split into chunks of 500, one statement each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    ARRAY,
    Cast,
    ColumnElement,
    Select,
    String,
    and_,
    any_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    or_,
    select,
    text,
    true,
    update,
)
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.sql.dml import Update

from cleveragents_tui.domain.approval import ApprovalAnswer
from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import ImmutableRecordError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.tool import ToolInvocation
from cleveragents_tui.store import mapping
from cleveragents_tui.store.driver_reads import AnySelect, Read, Reads, batch, driver_rows
from cleveragents_tui.store.session_writes import write
from cleveragents_tui.store.tables import (
    WROTE,
    ApprovalRow,
    CheckpointMetadataRow,
    DecisionArtifactRow,
    DecisionDependencyRow,
    DecisionRow,
    ToolInvocationRow,
)

USER_INTERVENTION = "user_intervention"


def id_set(session: Session, ids: Iterable[str], name: str = "ids") -> Select[tuple[str]]:
    """``SELECT value FROM <the ids>``: the ids bound as one JSON array parameter."""
    bound = bindparam(name, json_ids(ids), type_=String)
    return values_of(_dialect(session), bound)


def _jsonb(value: ColumnElement[Any] | QueryableAttribute[Any]) -> Cast[Any]:
    """``value`` cast to PostgreSQL's JSONB."""
    from sqlalchemy.dialects.postgresql import JSONB  # not loaded by commands on SQLite

    return cast(value, JSONB)


def values_of(dialect: str, array: ColumnElement[Any]) -> Select[tuple[str]]:
    """``SELECT value FROM <array>``: the strings of a JSON array (a bound parameter)."""
    if dialect == "postgresql":
        table = func.jsonb_array_elements_text(_jsonb(array)).table_valued("value")
    else:
        table = func.json_each(array).table_valued("value")
    return select(table.c.value)


def among(dialect: str, column: Any, name: str) -> ColumnElement[bool]:
    """``column`` is one of the strings of parameter ``name`` (:func:`strings`): on SQLite
    in a JSON array's values, on PostgreSQL ``= ANY`` of an array, whose length its planner
    knows (joined to a JSON array's rows, estimated at 100 whatever their number, it read
    every step of the plan for a few, and no index of an expression and a set is used)."""
    compared: ColumnElement[bool]
    if dialect == "postgresql":
        compared = column == any_(bindparam(name, type_=ARRAY(String)))
    else:
        compared = column.in_(values_of(dialect, bindparam(name, type_=String)))
    return compared


def strings(session: Reads, values: Iterable[str]) -> str | list[str]:
    """The parameter :func:`among` compares with, for the session's database."""
    if _dialect(session) == "postgresql":
        return sorted(set(values))
    return json_ids(values)


def _resource_argument(dialect: str) -> ColumnElement[Any]:
    """A tool call's ``resource`` argument when it is a string, else NULL, read in the
    database from the stored JSON."""
    c = ToolInvocationRow
    if dialect == "postgresql":
        arguments = _jsonb(c.arguments)
        is_text = func.jsonb_typeof(arguments["resource"]) == "string"
        return case((is_text, arguments["resource"].astext))
    is_text = func.json_type(c.arguments, "$.resource") == "text"
    return case((is_text, func.json_extract(c.arguments, "$.resource")))


def _named(dialect: str) -> ColumnElement[Any]:
    """A tool call's ``resource`` argument as the database extracts it, one parse of the
    JSON per call, not the two of :func:`_resource_argument`: compared with resource ids
    it matches the same calls, since no JSON number, object, array or constant reads as a
    ``namespace/name`` (what a later-writers read pays per call of the plan)."""
    c = ToolInvocationRow
    # the keys as literals, not bound values: the expression is then the one the index of
    # the plan's writes by resource is made of (migration 0010), which the planners match
    named: ColumnElement[Any] = (
        _jsonb(c.arguments).op("->>")(literal_column("'resource'"))
        if dialect == "postgresql"
        else func.json_extract(c.arguments, literal_column("'$.resource'"))
    )
    return named


def _dialect(session: Reads) -> str:
    return session.get_bind().dialect.name


Call = tuple[str, str | None, str, bool, tuple[str, ...]]
# a revert's later writes asked for with the calls: (plan, after sequence number, resources)
Later = tuple[str, int, Iterable[str]]


def calls_of(
    session: Reads,
    decision_ids: Iterable[str],
    resources: Iterable[str],
    later: Later | None = None,
) -> tuple[list[Call], list[tuple[str, str]]]:
    """(decision, resource named, tool, irreversible, side effects) of the tool calls of these
    decisions that are irreversible or name one of ``resources`` (their ``resource``
    argument, a string), by decision id, then in the order made; the side effects of an
    irreversible call only (``()`` for the others: a preview names no other's). One statement that starts
    from the ids, each looked up by its index (:func:`_calls_statement`), on the driver's
    cursor (store/driver_reads.py: its cache key cost twice its SQL). With ``later``, the
    revert's later writes too, sent with it (one round trip on PostgreSQL): (decision,
    resource) of the tool calls with side effects (stored other than ``[]``) that the
    plan's current decisions recorded after the sequence number, made on one of its
    resources, in the order made. Only those rows leave the database."""
    reads: list[Read] = [
        (
            _calls_statement(_dialect(session)),
            None,
            {"ids": json_ids(decision_ids), "resources": json_ids(resources)},
        )
    ]
    if later is not None:
        reads.append((_writes_statement(_dialect(session)), None, _writes_params(session, *later)))
    found = batch(session, reads)
    calls = [
        (
            decision_id,
            None if resource is None else str(resource),
            tool,
            bool(irreversible),
            tuple(mapping.load_json("tool_invocations", key, "side_effects", effects) or ())
            if irreversible
            else (),
        )
        for key, decision_id, resource, tool, irreversible, effects in found[0]
    ]
    writes = [(d, str(resource)) for d, resource in found[1]] if later is not None else []
    return calls, writes


@cache
def _calls_statement(dialect: str) -> Select[Any]:
    """:func:`calls_of`'s statement, built once per dialect. PostgreSQL, joining the id set
    to the calls, estimates the set at 100 rows whatever its size and scans every call of
    the database, reading each one's JSON arguments (7–15 ms at 10,000 calls for a set of
    50): there the calls of each id are a ``LATERAL`` subquery (``OFFSET 0`` keeps the
    planner from flattening it back into the join), one index lookup per id."""
    c = ToolInvocationRow
    ids = values_of(dialect, bindparam("ids", type_=String)).subquery()
    resources = values_of(dialect, bindparam("resources", type_=String))
    named = _resource_argument(dialect).label("named")
    columns = (c.invocation_id, c.decision_id, named, c.tool, c.irreversible, c.side_effects)
    if dialect != "postgresql":
        return (
            select(*columns)
            .join_from(ids, c, c.decision_id == ids.c.value)
            .where(or_(c.irreversible.is_(True), _named(dialect).in_(resources)))
            .order_by(c.decision_id, c.created_at, c.invocation_id)
        )
    # the arguments parsed once per call (each expression on the column parsed them again)
    calls = (
        select(*columns[:2], *columns[3:], c.created_at, _jsonb(c.arguments).label("args"))
        .where(c.decision_id == ids.c.value)
        .offset(0)
        .lateral("calls")
    )
    k = calls.c
    resource = k.args["resource"]
    named = case((func.jsonb_typeof(resource) == "string", resource.astext)).label("named")
    compared = k.args.op("->>")(literal_column("'resource'"))
    return (
        select(k.invocation_id, k.decision_id, named, k.tool, k.irreversible, k.side_effects)
        .select_from(ids.join(calls, true()))
        .where(or_(k.irreversible.is_(True), compared.in_(resources)))
        .order_by(k.decision_id, k.created_at, k.invocation_id)
    )


def _writes_params(
    session: Reads, plan_id: str, sequence_number: int, resources: Iterable[str]
) -> dict[str, Any]:
    """The later writes' parameters (``Later``)."""
    return {"plan": plan_id, "after": sequence_number, "resources": strings(session, resources)}


@cache
def _writes_statement(dialect: str) -> Select[Any]:
    c, d = ToolInvocationRow, DecisionRow
    named = _named(dialect)  # a string: it is one of the resources
    return (
        select(c.decision_id, named)
        .join(d, d.decision_id == c.decision_id)
        .where(
            # the plan and the writes as in the partial index ix_tool_invocations_plan_writes
            # (a bound value would hide the match from SQLite's planner), the plan compared on
            # the call only: the database starts from the plan's calls that wrote something,
            # not from every later decision of the plan
            c.plan_id == bindparam("plan"),
            text(WROTE),
            d.superseded_by.is_(None),
            d.sequence_number > bindparam("after"),
            among(dialect, named, "resources"),
        )
        .order_by(d.sequence_number, c.created_at, c.invocation_id)
    )


def json_ids(ids: Iterable[str]) -> str:
    """The ids as the one JSON array parameter the id-set statements take (sorted, once each)."""
    return json.dumps(sorted(set(ids)))


def _hydrate(session: Session, rows: Sequence[DecisionRow], ids: set[str]) -> list[Decision]:
    dep, art = DecisionDependencyRow, DecisionArtifactRow
    dependencies = list(  # read before the next statement runs
        session.execute(
            select(dep.upstream_decision_id, dep.downstream_ref, dep.dependency_type)
            .where(dep.upstream_decision_id.in_(id_set(session, ids)))
            .order_by(dep.dependency_id)
        )
    )
    artifacts = session.execute(
        select(art.decision_id, art.artifact_path, art.artifact_type)
        .where(art.decision_id.in_(id_set(session, ids)))
        .order_by(art.artifact_id)
    )
    return mapping.decisions_from_rows(rows, dependencies, artifacts)


@cache
def _current_among(dialect: str) -> Select[str, str, int]:
    d = DecisionRow
    return select(d.decision_id, d.plan_id, d.sequence_number).where(
        among(dialect, d.decision_id, "ids"), d.superseded_by.is_(None)
    )


def current_among(session: Reads, plan_id: str, decision_ids: Iterable[str]) -> list[str]:
    """Those of ``decision_ids`` that are current decisions of the plan, in sequence order
    (on the driver's cursor: store/driver_reads.py) — the order :func:`superseded_by_any`
    gives once they are superseded, so a diff in the same process can take these instead
    of reading them again. The plan is compared here, not in the WHERE clause: given it,
    SQLite walks the plan's index (every decision of the plan) instead of looking each id
    up by its key."""
    statement = _current_among(_dialect(session))
    rows = _tuples(session, statement, ids=strings(session, decision_ids))
    return [i for i, plan, _ in sorted(rows, key=lambda r: r[2]) if plan == plan_id]


def _tuples(session: Reads, statement: AnySelect, **params: Any) -> list[Any]:
    """The rows of a read of plain columns (ids, numbers) as the driver gives them: no row
    object made for each, of the thousands a correction of a large subtree reads."""
    return batch(session, [(statement, driver_rows, params)])[0]


@cache
def _supersede(dialect: str) -> Update:
    d = DecisionRow
    return (
        update(d)
        .where(among(dialect, d.decision_id, "ids"), d.superseded_by.is_(None))
        .values(superseded_by=bindparam("by"))
    )


def supersede(session: Session, decision_ids: Sequence[str], by: str) -> None:
    """Set ``superseded_by`` on every one of these decisions in one statement; refuses when
    any is missing or already superseded (a decision is superseded once). Sent on the
    driver's cursor (store/session_writes.py), as the next two."""
    if not decision_ids:
        return
    statement = _supersede(_dialect(session))
    changed = write(session, statement, {"ids": strings(session, decision_ids), "by": by})
    if changed != len(set(decision_ids)):
        raise ImmutableRecordError(
            "some of these decisions are missing or already superseded",
            "a decision is superseded once; correct the current decision instead",
        )


_a = ApprovalRow
_LAPSE = (
    update(_a)
    .where(_a.plan_id == bindparam("plan"), _a.answer.is_(None))
    .values(
        answer=ApprovalAnswer.DENIED.value,
        answered_by=bindparam("by"),
        reason=bindparam("reason"),
        answered_at=bindparam("now"),
    )
)


def lapse_pending_approvals(session: Session, plan_id: str, by: str, reason: str) -> int:
    """Deny every unanswered approval of the plan (its old attempt's gates), in one statement;
    returns how many."""
    values = {"plan": plan_id, "by": by, "reason": reason, "now": utc_now()}
    return write(session, _LAPSE, values)


@cache
def _prune_later(dialect: str) -> Update:
    c = CheckpointMetadataRow
    return (
        update(c)
        .where(
            c.plan_id == bindparam("plan"),
            c.resource_id == bindparam("resource"),
            c.pruned_at.is_(None),
            c.created_at >= bindparam("at"),
            ~and_(c.created_at == bindparam("at"), c.checkpoint_id <= bindparam("id")),
        )
        .values(pruned_at=bindparam("now"))
    )


def prune_later(session: Session, plan_id: str, after: CheckpointMetadata) -> None:
    """Mark pruned, in one statement, the live checkpoints of ``after``'s resource in the
    plan that come after it (``created_at``, then id: the order of ``for_plan``) — by the
    plan's (resource, time) index, not by reading every checkpoint the plan took."""
    values = {
        "plan": plan_id,
        "resource": after.resource_id,
        "at": after.created_at,
        "id": after.checkpoint_id,
        "now": utc_now(),
    }
    write(session, _prune_later(_dialect(session)), values)


@cache
def _superseded_by(dialect: str) -> Select[str, str, int]:
    d = DecisionRow
    return select(d.decision_id, d.plan_id, d.sequence_number).where(
        among(dialect, d.superseded_by, "ids")
    )


def superseded_by_any(session: Reads, plan_id: str, by: Iterable[str]) -> list[str]:
    """The plan's decisions superseded by any of ``by``, in sequence order (by the
    superseded index, migration 0012; the plan compared here: given it, SQLite walks every
    decision of the plan instead), on the driver's cursor."""
    rows = _tuples(session, _superseded_by(_dialect(session)), ids=strings(session, by))
    return [i for i, plan, _ in sorted(rows, key=lambda r: r[2]) if plan == plan_id]


def failed_calls(
    session: Session, plan_id: str, skip_key_prefix: str
) -> list[tuple[Decision, int, ToolInvocation]]:
    """The failed tool calls (``ok`` false) of the plan's current Execute decisions, but those
    whose step key starts with ``skip_key_prefix``: (decision, the call's number among the
    decision's calls, the call), in sequence order, then as made. Three statements and the
    decisions' hydration, however large the plan."""
    d, c = DecisionRow, ToolInvocationRow
    failing = (
        select(d.decision_id)
        .join(c, c.decision_id == d.decision_id)
        .where(
            d.plan_id == plan_id,
            d.superseded_by.is_(None),
            d.phase == "execute",
            or_(  # compared exactly: SQLite's LIKE ignores case
                d.step_key.is_(None),
                func.substr(d.step_key, 1, len(skip_key_prefix)) != skip_key_prefix,
            ),
            c.ok.is_(False),
        )
    )
    rows = list(
        session.scalars(select(d).where(d.decision_id.in_(failing)).order_by(d.sequence_number))
    )
    if not rows:
        return []
    ids = {r.decision_id for r in rows}
    calls = session.scalars(
        select(c)
        .where(c.decision_id.in_(id_set(session, ids)))
        .order_by(c.decision_id, c.created_at, c.invocation_id)
    )
    numbered: dict[str, list[ToolInvocation]] = {}
    for row in calls:
        numbered.setdefault(row.decision_id, []).append(mapping.invocation_from_row(row))
    return [
        (decision, number, run)
        for decision in _hydrate(session, rows, ids)
        for number, run in enumerate(numbered.get(decision.decision_id, []))
        if run.ok is False
    ]
