"""The SQL of impact analysis (engine/core/impact.py explains what is computed and why): the bulk
reads that load a plan's influence DAG, and the one recursive CTE of the cold path."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Dialect,
    Select,
    String,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal_column,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import InstrumentedAttribute, aliased
from sqlalchemy.sql.compiler import SQLCompiler

from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.store.correction_queries import among, strings
from cleveragents_tui.store.driver_reads import Reads
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import DecisionDependencyRow, DecisionRow, PlanRow

DECISION = "decision"
PLAN = "plan"
_CHUNK = 500

NodeRow = tuple[str, str | None, str, str | None]  # decision, parent, plan, superseded_by
EdgeRow = tuple[str, str, str]  # upstream decision, downstream ref, dependency type
# One plan's decisions as a read saw them: (how many, how many superseded, the highest
# sequence number or -1, the dependency rows leaving them, and the same three counts of the
# other plans read with it — its child plans — summed). Decisions are append-only and
# superseded once, so a later read of the rows recorded after that number, with counts
# that add up, saw appends only (no supersede, no child plan spawned by an older one, no
# decision recorded in a child plan).
RowMark = tuple[int, int, int, int, int]


def influence_rows(
    store: Store, plan_id: str
) -> tuple[set[str], list[NodeRow], list[EdgeRow], RowMark]:
    """The plans, decisions and dependency rows of ``plan_id``'s influence DAG, in one
    transaction (a consistent snapshot): the plan tree, its decisions, the dependency rows
    leaving them; again only when an influence edge leads into a plan not yet read. Last,
    the mark of ``plan_id``'s own decisions (see :func:`appended_rows`).

    Raises :class:`NotFoundError` when the plan does not exist.
    """
    plans: set[str] = set()
    nodes: list[NodeRow] = []
    dependencies: list[EdgeRow] = []
    with store.unit_of_work() as uow:
        connection = uow._session.connection()
        pending = {plan_id}
        while pending:
            found = _plan_trees(connection, pending) - plans
            if plan_id not in plans and plan_id not in found:
                raise NotFoundError(
                    f"plan {plan_id} does not exist", "list plans with `agents plan list`"
                )
            plans |= found
            new_nodes, new_dependencies = _plan_rows(connection, found)
            nodes += new_nodes
            dependencies += new_dependencies
            known = {row[0] for row in nodes}
            missing = {down for _, down, kind in new_dependencies if kind == DECISION} - known
            pending = _plans_of(connection, missing) - plans
        mark = _mark(connection, plan_id, plans - {plan_id})
    return plans, nodes, dependencies, mark


def appended_rows(
    store: Store, plan_id: str, mark: RowMark, others: Collection[str]
) -> tuple[RowMark, list[NodeRow], list[EdgeRow]] | None:
    """The decisions of ``plan_id`` recorded since a read of it and of the plans ``others``
    that saw ``mark``, with the dependency rows leaving or entering them, and the mark now;
    None when anything else changed (a decision superseded, a child plan spawned, any row
    of ``others`` added or changed): then read it all again."""
    d, dep = DecisionRow, DecisionDependencyRow
    with store.unit_of_work() as uow:
        connection = uow._session.connection()
        now = _mark(connection, plan_id, others)
        if now[4] != mark[4]:
            return None
        rows = connection.execute(
            select(d.decision_id, d.parent_decision_id, d.plan_id, d.superseded_by)
            .where(d.plan_id == plan_id, d.sequence_number > mark[2])
            .order_by(d.sequence_number)
        )
        nodes: list[NodeRow] = [(row[0], row[1], row[2], row[3]) for row in rows]
        superseded = sum(node[3] is not None for node in nodes)
        if now[:2] != (mark[0] + len(nodes), mark[1] + superseded):
            return None
        ids = [node[0] for node in nodes]
        edges: dict[EdgeRow, str] = {}  # -> the upstream decision's plan (once: chunks overlap)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            found = connection.execute(
                select(dep.upstream_decision_id, dep.downstream_ref, dep.dependency_type, d.plan_id)
                .join(d, d.decision_id == dep.upstream_decision_id)
                .where(or_(dep.upstream_decision_id.in_(chunk), dep.downstream_ref.in_(chunk)))
            )
            edges.update(((row[0], row[1], row[2]), row[3]) for row in found)
    if now[3] != mark[3] + sum(plan == plan_id for plan in edges.values()):
        return None  # a dependency row left an older decision: a child plan spawned
    return now, nodes, list(edges)


def _mark(connection: Connection, plan_id: str, others: Collection[str]) -> RowMark:
    d = DecisionRow
    count, superseded, through = connection.execute(
        select(func.count(), func.count(d.superseded_by), func.max(d.sequence_number)).where(
            d.plan_id == plan_id
        )
    ).one()
    edges = _edges_leaving(connection, [plan_id])
    rest = 0  # each count only grows, so an unchanged sum means none changed
    if others:
        other_count, other_superseded = connection.execute(
            select(func.count(), func.count(d.superseded_by)).where(d.plan_id.in_(others))
        ).one()
        rest = int(other_count) + int(other_superseded) + _edges_leaving(connection, others)
    through = -1 if through is None else int(through)
    return int(count), int(superseded), through, edges, rest


def _edges_leaving(connection: Connection, plans: Collection[str]) -> int:
    d = DecisionRow
    return int(
        connection.scalar(
            select(func.count())
            .select_from(DecisionDependencyRow)
            .join(d, d.decision_id == DecisionDependencyRow.upstream_decision_id)
            .where(d.plan_id.in_(plans))
        )
        or 0
    )


def _plan_trees(connection: Connection, roots: Iterable[str]) -> set[str]:
    """The given plans that exist and all their descendants (``plans.parent_plan_id``)."""
    found: set[str] = set()
    ids = sorted(roots)
    for start in range(0, len(ids), _CHUNK):
        tree = (
            select(PlanRow.plan_id)
            .where(PlanRow.plan_id.in_(ids[start : start + _CHUNK]))
            .cte("tree", recursive=True)
        )
        below = tree.alias("below")
        tree = tree.union(
            select(PlanRow.plan_id).join(below, PlanRow.parent_plan_id == below.c.plan_id)
        )
        found.update(connection.scalars(select(tree.c.plan_id)))
    return found


def _plan_rows(connection: Connection, plans: Iterable[str]) -> tuple[list[NodeRow], list[EdgeRow]]:
    """The decisions of these plans, and the dependency rows leaving them."""
    nodes: list[NodeRow] = []
    dependencies: list[EdgeRow] = []
    ids = sorted(plans)
    d = DecisionRow
    dep = DecisionDependencyRow
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        rows = connection.execute(
            select(d.decision_id, d.parent_decision_id, d.plan_id, d.superseded_by).where(
                d.plan_id.in_(chunk)
            )
        )
        nodes.extend((row[0], row[1], row[2], row[3]) for row in rows)
        edges = connection.execute(
            select(dep.upstream_decision_id, dep.downstream_ref, dep.dependency_type)
            .join(d, d.decision_id == dep.upstream_decision_id)
            .where(d.plan_id.in_(chunk))
        )
        dependencies.extend((row[0], row[1], row[2]) for row in edges)
    return nodes, dependencies


def _plans_of(connection: Connection, decision_ids: Iterable[str]) -> set[str]:
    ids = sorted(decision_ids)
    found: set[str] = set()
    for start in range(0, len(ids), _CHUNK):
        found.update(
            connection.scalars(
                select(DecisionRow.plan_id)
                .where(DecisionRow.decision_id.in_(ids[start : start + _CHUNK]))
                .distinct()
            )
        )
    return found


# -- the cold path: one recursive CTE -----------------------------------------------------------


def affected_refs_in(session: Reads, decision_ids: str | Iterable[str]) -> frozenset[str]:
    """The rows of the affected-subtree CTE (decision ids, and child plan ids behind
    :data:`PLAN_MARK`) of a decision id, or the union of those of several (the CTE's
    anchor is then the whole set, one JSON parameter), in the session's transaction: a
    preview reads its whole snapshot in one."""
    connection = session.connection()
    if isinstance(decision_ids, str):
        statement = _affected_sql(connection.dialect, decision_ids)
    else:
        statement = _affected_sql(connection.dialect, strings(session, decision_ids), many=True)
    return _fetch(connection, statement)


def _fetch(connection: Connection, statement: tuple[str, Any]) -> frozenset[str]:
    sql, params = statement
    cursor = connection.connection.cursor()
    try:
        cursor.execute(sql, params)
        return frozenset(row[0] for row in cursor.fetchall())
    finally:
        cursor.close()


# Marks a child plan's id among the CTE's rows. ULIDs are Crockford base32 (digits and
# capital letters), so no decision id starts with it; a marked id matches no edge either.
PLAN_MARK = "+"
_COMPILED: dict[tuple[str, bool], SQLCompiler] = {}


def _affected_sql(dialect: Dialect, target: str | list[str], many: bool = False) -> tuple[str, Any]:
    """The statement compiled once per dialect, and the driver's parameters for it
    (``target``: a decision id, or with ``many`` several, as :func:`strings` gives them).

    Run on the driver's own cursor: building SQLAlchemy's cache key for a statement of this
    size, and a result row object per affected decision, costs more than the query itself
    on a small subtree.
    """
    compiled = _COMPILED.get((dialect.name, many))
    if compiled is None:
        compiled = affected_statement(dialect.name, many).compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"{dialect.name} compiled a SELECT into {type(compiled).__name__}")
        _COMPILED[(dialect.name, many)] = compiled
    params = compiled.construct_params({"target": target}, escape_names=False)
    if compiled.positiontup is not None:
        return compiled.string, tuple(params[name] for name in compiled.positiontup)
    return compiled.string, params


@cache
def affected_statement(dialect: str, many: bool = False) -> Select[tuple[str]]:
    """``WITH RECURSIVE affected(ref)``: the target, then transitively what each row leads to.

    The target's row comes from ``decisions`` (no row: no such decision); with ``many``, the
    targets' rows, named in the same parameter (a JSON array on SQLite, an array on
    PostgreSQL: correction_queries.among). A row is a
    decision id, or a child plan's id behind :data:`PLAN_MARK` (a leaf: it matches no edge).
    ``UNION`` keeps each row once, so a diamond is walked once and a cycle would end.

    The recursive step is the union of the two edge kinds, each an index lookup by the
    queued id: current structural children (``ix_decisions_parent_decision_id``), and
    dependency rows (the ``uq_dependency_edge`` index leads with the upstream id) that name
    a current decision or a child plan. It is written per dialect, as the databases differ:

    - PostgreSQL allows one recursive term: the work table joined to a ``LATERAL``
      ``UNION ALL`` of the two edge kinds.
    - SQLite has no ``LATERAL``, and joined to a union of all edges it materialises every
      edge of the database in each step; instead the edge kinds are two recursive terms of
      the CTE's compound (SQLite 3.34 or later), evaluated per queued row.
    """

    def as_text(column: InstrumentedAttribute[str]) -> ColumnElement[str]:
        # PostgreSQL wants one column type across the CTE's terms; the marked ids are text.
        return column.expression if dialect == "sqlite" else cast(column, Text)

    anchor = select(as_text(DecisionRow.decision_id).label("ref")).where(
        # several: on PostgreSQL ``= ANY`` of an array, whose length the planner knows (a
        # JSON array's rows, estimated at 100, made it plan the recursion for a large set:
        # 20 ms for 4 targets at 1,000 decisions, against 5 ms for the whole subtree)
        among(dialect, DecisionRow.decision_id, "target")
        if many
        else DecisionRow.decision_id == bindparam("target", type_=String)
    )
    affected = anchor.cte("affected", recursive=True)
    queued = affected.alias("queued")
    children = select(as_text(DecisionRow.decision_id).label("ref")).where(
        DecisionRow.parent_decision_id == queued.c.ref, DecisionRow.superseded_by.is_(None)
    )
    dep = DecisionDependencyRow
    downstream = aliased(DecisionRow, name="downstream")
    is_plan = dep.dependency_type == _constant(PLAN)
    dependents = (
        select(
            case(
                (is_plan, _constant(PLAN_MARK) + dep.downstream_ref),
                else_=as_text(dep.downstream_ref),
            ).label("ref")
        )
        .outerjoin_from(
            dep,
            downstream,
            and_(
                dep.dependency_type == _constant(DECISION),
                downstream.decision_id == dep.downstream_ref,
            ),
        )
        .where(
            dep.upstream_decision_id == queued.c.ref,
            or_(
                is_plan,
                and_(downstream.decision_id.is_not(None), downstream.superseded_by.is_(None)),
            ),
        )
    )
    if dialect == "sqlite":
        recursive = affected.union(children, dependents)
    else:
        step = union_all(children.correlate(queued), dependents.correlate(queued)).lateral("step")
        recursive = affected.union(select(step.c.ref).select_from(queued.join(step, true())))
    return select(recursive.c.ref)


def _constant(value: str) -> ColumnElement[str]:
    """One of our string constants, written into the SQL: no parameter to bind per call."""
    if value not in (DECISION, PLAN, PLAN_MARK):
        raise ValueError(f"not a constant of this query: {value!r}")
    return literal_column(f"'{value}'", String)
