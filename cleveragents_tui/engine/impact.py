"""Impact analysis: which decisions and child plans a correction of one decision affects.

ADR-035 ("Affected Subtree Computation") defines the affected subtree of a target decision:
start from the target and follow, transitively,

- its **structural children** (``decisions.parent_decision_id``) that are current, and
- its **influence dependents** (``decision_dependencies`` rows of type ``'decision'``),

and collect the **child plans** (dependency rows of type ``'plan'``) of every affected
decision. Decisions and plans are each returned once.

Two deliberate readings of the ADR's reference loop:

- *Dependents must be current too.* The ADR filters ``superseded_by IS NULL`` on children
  only. A current decision can keep an influence edge to a decision that an earlier
  correction already superseded (the dependent sat under the corrected branch, its upstream
  did not); following it would put superseded decisions, and their history, into the
  subtree, and superseding the subtree would then fail (a decision is superseded once).
  Here neither kind of edge leads into a superseded decision. The target itself is always
  in the subtree, as in the ADR.
- *Child plans are collected, not entered.* A child plan's own decisions are not listed:
  Cross-Plan Correction Cascading cancels (or, once applied, refuses to roll back) a child
  plan as a whole, so its plan id is what the correction needs. Influence edges that
  cross into another plan's decisions are still followed like any other.

Two ways to compute it, with the same answer:

- :func:`affected_subtree`, the *cold* path for a one-off question (a preview from the CLI):
  one statement with one recursive CTE, built with SQLAlchemy Core, on SQLite and
  PostgreSQL. Its rows are the affected decisions and the child plans.
- :class:`InfluenceGraph`, the *warm* path for a plan being run or browsed: the plan's
  influence DAG in memory (a networkx ``DiGraph``), loaded with a few bulk queries and then
  kept current by the runner (:meth:`InfluenceGraph.add_decision`,
  :meth:`InfluenceGraph.add_child_plan`, :meth:`InfluenceGraph.supersede`), so that each
  question is a breadth-first search with no database round trip.

networkx is imported only when a graph is built: the cold path stays light to import.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    literal_column,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import InstrumentedAttribute, aliased
from sqlalchemy.sql.compiler import SQLCompiler

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import DecisionDependencyRow, DecisionRow, PlanRow

if TYPE_CHECKING:
    import networkx as nx

DECISION = "decision"
PLAN = "plan"
_CHUNK = 500
_HOW_TO_LIST = "see a plan's decisions with `agents plan tree PLAN`"


@dataclass(frozen=True)
class AffectedSubtree:
    """The decisions (the target included) and the child plans a correction affects."""

    decisions: frozenset[str]
    plans: frozenset[str]


# -- the warm path: the influence DAG in memory -------------------------------------------------


class InfluenceGraph:
    """The influence DAG of a plan, its child plans (all the way down) and any plan their
    influence edges lead into: node = decision id, edge = structural child or influence.

    Nodes carry ``plan_id`` and ``current``; edges carry ``child`` and/or ``influence``
    (``True``). Child plans spawned by a decision are kept beside the graph, not as nodes.
    Superseded decisions stay in the graph (history), marked not current; :meth:`affected`
    never enters them.

    The set of plans held is closed under outgoing edges, so :meth:`affected` is exact for
    every decision the graph holds. Keep it current with :meth:`add_decision`,
    :meth:`add_child_plan` and :meth:`supersede` as the store changes; after those calls it
    equals a fresh :meth:`load`.
    """

    def __init__(self, plan_id: str) -> None:
        import networkx as nx

        self.plan_id = plan_id
        self._graph: nx.DiGraph[str] = nx.DiGraph()
        self._plans: set[str] = set()
        self._superseded: set[str] = set()
        self._child_plans: dict[str, set[str]] = {}

    # -- loading -----------------------------------------------------------------------------

    @classmethod
    def load(cls, store: Store, plan_id: str) -> InfluenceGraph:
        """Read the graph in a few bulk queries, in one transaction (a consistent snapshot):
        the plan tree, its decisions, the dependency rows leaving them; again only when an
        influence edge leads into a plan not yet held.

        Raises :class:`NotFoundError` when the plan does not exist.
        """
        graph = cls(plan_id)
        nodes: list[tuple[str, str | None, str, str | None]] = []
        dependencies: list[tuple[str, str, str]] = []
        with store.unit_of_work() as uow:
            connection = uow.session.connection()
            pending = {plan_id}
            while pending:
                plans = _plan_trees(connection, pending) - graph._plans
                if plan_id not in graph._plans and plan_id not in plans:
                    raise NotFoundError(
                        f"plan {plan_id} does not exist", "list plans with `agents plan list`"
                    )
                graph._plans |= plans
                new_nodes, new_dependencies = _plan_rows(connection, plans)
                nodes += new_nodes
                dependencies += new_dependencies
                known = {row[0] for row in nodes}
                missing = {down for _, down, kind in new_dependencies if kind == DECISION} - known
                pending = _plans_of(connection, missing) - graph._plans
        graph._build(nodes, dependencies)
        return graph

    def _build(
        self,
        nodes: list[tuple[str, str | None, str, str | None]],
        dependencies: list[tuple[str, str, str]],
    ) -> None:
        graph = self._graph
        graph.add_nodes_from(
            (decision_id, {"plan_id": plan, "current": superseded_by is None})
            for decision_id, _, plan, superseded_by in nodes
        )
        self._superseded.update(d for d, _, _, superseded_by in nodes if superseded_by)
        graph.add_edges_from(
            ((parent, decision_id) for decision_id, parent, _, _ in nodes if parent is not None),
            child=True,
        )
        graph.add_edges_from(
            ((up, down) for up, down, kind in dependencies if kind == DECISION and down in graph),
            influence=True,
        )
        for up, down, kind in dependencies:
            if kind == PLAN:
                self._child_plans.setdefault(up, set()).add(down)

    # -- questions ---------------------------------------------------------------------------

    def affected(self, decision_id: str) -> AffectedSubtree:
        """The affected subtree of ``decision_id``: a breadth-first search, no database."""
        if decision_id not in self._graph:
            raise NotFoundError(
                f"decision {decision_id} is not in the influence graph of plan {self.plan_id}",
                _HOW_TO_LIST,
            )
        successors = self._graph.succ
        superseded = self._superseded
        seen = {decision_id}
        queue = [decision_id]
        for node in queue:  # the list grows while it is walked: breadth first
            for following in successors[node]:
                if following not in seen and following not in superseded:
                    seen.add(following)
                    queue.append(following)
        plans: set[str] = set()
        if len(self._child_plans) < len(seen):
            for spawner, spawned in self._child_plans.items():
                if spawner in seen:
                    plans |= spawned
        else:
            for node in seen:
                plans |= self._child_plans.get(node, set())
        return AffectedSubtree(frozenset(seen), frozenset(plans))

    @property
    def graph(self) -> nx.DiGraph[str]:
        """The DAG itself, for reading (drawing, statistics); change it through this class."""
        return self._graph

    @property
    def plan_ids(self) -> frozenset[str]:
        """Every plan whose decisions the graph holds."""
        return frozenset(self._plans)

    def child_plans(self, decision_id: str) -> frozenset[str]:
        return frozenset(self._child_plans.get(decision_id, ()))

    def is_current(self, decision_id: str) -> bool:
        return decision_id in self._graph and decision_id not in self._superseded

    def __contains__(self, decision_id: object) -> bool:
        return decision_id in self._graph

    def __len__(self) -> int:
        return len(self._graph)

    # -- keeping it current ------------------------------------------------------------------

    def add_decision(self, decision: Decision, depends_on: Iterable[str] = ()) -> None:
        """A decision just recorded, with the decisions it declared it depends on.

        Edges from decisions the graph does not hold are left out, as :meth:`load` leaves
        them out (they leave another plan, outside this graph).
        """
        if decision.plan_id not in self._plans:
            raise ValueError(
                f"decision {decision.decision_id} belongs to plan {decision.plan_id}, "
                f"which the influence graph of plan {self.plan_id} does not hold"
            )
        decision_id = decision.decision_id
        self._graph.add_node(
            decision_id, plan_id=decision.plan_id, current=decision.superseded_by is None
        )
        if decision.superseded_by is not None:
            self._superseded.add(decision_id)
        parent = decision.parent_decision_id
        if parent is not None and parent in self._graph:
            self._graph.add_edge(parent, decision_id, child=True)
        for upstream in depends_on:
            if upstream in self._graph and upstream != decision_id:
                self._graph.add_edge(upstream, decision_id, influence=True)
        for child_plan in decision.downstream_plan_ids:
            self.add_child_plan(decision_id, child_plan)

    def add_child_plan(self, decision_id: str, plan_id: str) -> None:
        """``decision_id`` spawned the child plan ``plan_id`` (a ``'plan'`` dependency)."""
        if decision_id not in self._graph:
            raise NotFoundError(
                f"decision {decision_id} is not in the influence graph of plan {self.plan_id}",
                _HOW_TO_LIST,
            )
        self._child_plans.setdefault(decision_id, set()).add(plan_id)
        self._plans.add(plan_id)

    def supersede(self, decision_ids: Iterable[str]) -> None:
        """These decisions were superseded; ids the graph does not hold are ignored."""
        nodes = self._graph.nodes
        for decision_id in decision_ids:
            if decision_id in self._graph:
                self._superseded.add(decision_id)
                nodes[decision_id]["current"] = False


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


def _plan_rows(
    connection: Connection, plans: Iterable[str]
) -> tuple[list[tuple[str, str | None, str, str | None]], list[tuple[str, str, str]]]:
    """The decisions of these plans, and the dependency rows leaving them."""
    nodes: list[tuple[str, str | None, str, str | None]] = []
    dependencies: list[tuple[str, str, str]] = []
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


def affected_subtree(store: Store, decision_id: str) -> AffectedSubtree:
    """The affected subtree of ``decision_id``, read straight from the store in one statement.

    Raises :class:`NotFoundError` when no such decision exists.
    """
    sql, params = _affected_sql(store.engine.dialect, decision_id)
    with store.engine.connect() as connection:
        cursor = connection.connection.cursor()
        try:
            cursor.execute(sql, params)
            refs: frozenset[str] = frozenset(row[0] for row in cursor.fetchall())
        finally:
            cursor.close()
    marked = [ref for ref in refs if ref[0] == PLAN_MARK]
    decisions = refs.difference(marked) if marked else refs
    if decision_id not in decisions:
        raise NotFoundError(f"decision {decision_id} does not exist", _HOW_TO_LIST)
    return AffectedSubtree(decisions, frozenset(ref[1:] for ref in marked))


# Marks a child plan's id among the CTE's rows. ULIDs are Crockford base32 (digits and
# capital letters), so no decision id starts with it; a marked id matches no edge either.
PLAN_MARK = "+"
_COMPILED: dict[str, SQLCompiler] = {}


def _affected_sql(dialect: Dialect, decision_id: str) -> tuple[str, Any]:
    """The statement compiled once per dialect, and the driver's parameters for it.

    Run on the driver's own cursor: building SQLAlchemy's cache key for a statement of this
    size, and a result row object per affected decision, costs more than the query itself
    on a small subtree.
    """
    compiled = _COMPILED.get(dialect.name)
    if compiled is None:
        compiled = affected_statement(dialect.name).compile(dialect=dialect)
        if not isinstance(compiled, SQLCompiler):
            raise TypeError(f"{dialect.name} compiled a SELECT into {type(compiled).__name__}")
        _COMPILED[dialect.name] = compiled
    params = compiled.construct_params({"target": decision_id}, escape_names=False)
    if compiled.positiontup is not None:
        return compiled.string, tuple(params[name] for name in compiled.positiontup)
    return compiled.string, params


def affected_statement(dialect: str) -> Select[tuple[str]]:
    """``WITH RECURSIVE affected(ref)``: the target, then transitively what each row leads to.

    The target's row comes from ``decisions`` (no row: no such decision). A row is a
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
        DecisionRow.decision_id == bindparam("target", type_=String)
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
