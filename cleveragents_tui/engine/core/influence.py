"""Influence graphs kept warm for the plans a long-lived process has open (the app).

The cold path (one recursive CTE, ``impact.affected_subtree_in``) answers a one-off question
faster than building a graph, so the CLI uses it. A process that keeps a plan open — the app
showing its tree and previewing corrections — opens its graph here once; the runner and the
correction engine then report every decision they record, every child plan they spawn and
every decision they supersede, so the graph stays equal to a fresh load without reloading.
Changes made by other processes are not seen: the app catches the graph up when its store
fingerprint changes (:meth:`OpenGraphs.catch_up`: the decisions another process recorded are
added; anything else reads the graph again).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.engine.core.impact import InfluenceGraph
from cleveragents_tui.store.impact_queries import appended_rows
from cleveragents_tui.store.store import Store


class OpenGraphs:
    def __init__(self) -> None:
        self._graphs: dict[str, InfluenceGraph] = {}
        self._lock = threading.Lock()
        self._updating = threading.RLock()  # one load or catch-up at a time: none undoes another

    def open(self, store: Store, plan_id: str) -> InfluenceGraph:
        """Load (or reload) the graph of ``plan_id`` and keep it current from now on."""
        with self._updating:
            graph = InfluenceGraph.load(store, plan_id)
            with self._lock:
                self._graphs[plan_id] = graph
            return graph

    def catch_up(self, store: Store, plan_id: str) -> InfluenceGraph:
        """Bring the open graph of ``plan_id`` up to the store: add the decisions recorded
        since it was read (another process ran the plan on: a few rows read, not the whole
        plan again); load it when anything else changed, or when it is not open."""
        with self._updating:
            with self._lock:
                graph = self._graphs.get(plan_id)
            if graph is not None:
                others = graph.plan_ids - {plan_id}
                appended = appended_rows(store, plan_id, graph.mark, others)
                if appended is not None:
                    with self._lock:
                        if graph.add_appended(*appended):
                            return graph
            return self.open(store, plan_id)

    def close(self, plan_id: str) -> None:
        with self._lock:
            self._graphs.pop(plan_id, None)

    def holding(self, plan_id: str) -> InfluenceGraph | None:
        """An open graph that holds ``plan_id``: its own when open (the one the app keeps
        caught up while it shows the plan), else a parent's that includes it."""
        with self._lock:
            own = self._graphs.get(plan_id)
            if own is not None:
                return own
            return next((g for g in self._graphs.values() if plan_id in g.plan_ids), None)

    def holds(self, decision_id: str) -> bool:
        """Whether an open graph holds ``decision_id`` (a preview then reads no CTE)."""
        with self._lock:
            return any(decision_id in g for g in self._graphs.values())

    def recorded(self, decision: Decision, depends_on: Iterable[str] = ()) -> None:
        upstream = tuple(depends_on)
        with self._lock:
            for graph in self._graphs.values():
                if decision.plan_id in graph.plan_ids:
                    graph.add_decision(decision, upstream)

    def spawned(self, decision_id: str, child_plan_id: str) -> None:
        with self._lock:
            for graph in self._graphs.values():
                if decision_id in graph:
                    graph.add_child_plan(decision_id, child_plan_id)

    def superseded(self, decision_ids: Iterable[str]) -> None:
        ids = tuple(decision_ids)
        with self._lock:
            for graph in self._graphs.values():
                graph.supersede(ids)


OPEN_GRAPHS = OpenGraphs()
