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

- :func:`affected_subtree_in`, the *cold* path for a one-off question (a preview from the CLI):
  one statement with one recursive CTE (``store/impact_queries.py``), on SQLite and
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
from typing import TYPE_CHECKING

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.store.impact_queries import (
    DECISION,
    PLAN,
    PLAN_MARK,
    EdgeRow,
    NodeRow,
    RowMark,
    affected_refs_in,
    influence_rows,
)
from cleveragents_tui.store.reading import Reading
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

if TYPE_CHECKING:
    import networkx as nx

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
        self.mark: RowMark = (0, 0, -1, 0, 0)  # of the plans held, as last read

    # -- loading -----------------------------------------------------------------------------

    @classmethod
    def load(cls, store: Store, plan_id: str) -> InfluenceGraph:
        """Read the graph in a few bulk queries, in one transaction (a consistent snapshot).

        Raises :class:`NotFoundError` when the plan does not exist.
        """
        graph = cls(plan_id)
        graph._plans, nodes, dependencies, graph.mark = influence_rows(store, plan_id)
        graph._build(nodes, dependencies)
        return graph

    def add_appended(
        self, mark: RowMark, nodes: list[NodeRow], dependencies: list[EdgeRow]
    ) -> bool:
        """Add the decisions another process recorded in the plan since :attr:`mark`, with
        their dependency rows (``store.impact_queries.appended_rows``); after it the graph
        equals a fresh :meth:`load`. False, changing nothing, when they lead out of the
        plans held (a child plan spawned, an influence edge into another plan): then load."""
        new = {node[0] for node in nodes}
        held = self._graph
        for up, down, kind in dependencies:
            leaves = up in new or up in held
            if leaves and (kind == PLAN or (down not in held and down not in new)):
                return False
        self._build(
            nodes,
            [edge for edge in dependencies if edge[0] in new or edge[0] in held],
        )
        self.mark = mark
        return True

    def _build(
        self,
        nodes: list[NodeRow],
        dependencies: list[EdgeRow],
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


# -- the cold path: one recursive CTE (store/impact_queries.py) ------------------------------


def affected_subtree_in(uow: UnitOfWork | Reading, decision_id: str) -> AffectedSubtree:
    """The affected subtree of ``decision_id``, read in one statement in the transaction of
    ``uow``.

    Raises :class:`NotFoundError` when no such decision exists.
    """
    return subtree_from(decision_id, uow.run(affected_refs_in, decision_id))


def affected_decisions_in(uow: UnitOfWork | Reading, decision_ids: Iterable[str]) -> frozenset[str]:
    """The decisions in the affected subtree of any of ``decision_ids``, in one statement in
    the transaction of ``uow`` (the union of their subtrees; ids of no decision add none)."""
    ids = list(decision_ids)
    if not ids:
        return frozenset()
    return frozenset(ref for ref in uow.run(affected_refs_in, ids) if ref[0] != PLAN_MARK)


def subtree_from(decision_id: str, refs: frozenset[str]) -> AffectedSubtree:
    """The affected subtree of ``decision_id`` from the rows of its CTE (as
    ``store.impact_queries.affected_statement`` gives them)."""
    marked = [ref for ref in refs if ref[0] == PLAN_MARK]
    decisions = refs.difference(marked) if marked else refs
    if decision_id not in decisions:
        raise NotFoundError(f"decision {decision_id} does not exist", _HOW_TO_LIST)
    return AffectedSubtree(decisions, frozenset(ref[1:] for ref in marked))
