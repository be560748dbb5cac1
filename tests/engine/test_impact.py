"""Impact analysis (ADR-035, "Affected Subtree Computation"), on SQLite and PostgreSQL.

Three computations must agree everywhere: the cold path (one recursive CTE), the warm path
(the in-memory influence graph) and the specification's per-node query loop
(``reference_affected``, also the benchmark's baseline).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.dependency import DecisionDependency
from cleveragents_tui.domain.enums import DecisionType, DependencyType, Phase
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.impact import (
    AffectedSubtree,
    InfluenceGraph,
)
from cleveragents_tui.store.store import Store
from tests.benchmarks.bench_impact import affected_subtree, reference_affected


@dataclass
class PlanBuilder:
    """Writes a plan's decisions and edges to the store, naming decisions by short keys."""

    store: Store
    plan: Plan
    ids: dict[str, str] = field(default_factory=dict)
    sequence: int = 0

    @classmethod
    def create(cls, store: Store, parent: PlanBuilder | None = None, by: str = "") -> PlanBuilder:
        plan = Plan(
            action="test/impact",
            parent_plan_id=parent.plan.plan_id if parent else None,
            spawning_decision_id=parent.ids[by] if parent else None,
        )
        with store.unit_of_work(write=True) as uow:
            uow.plans.add(plan)
            if parent is not None:
                uow.decisions.add_dependency(
                    DecisionDependency(
                        upstream_decision_id=parent.ids[by],
                        downstream_ref=plan.plan_id,
                        dependency_type=DependencyType.PLAN,
                    )
                )
            uow.commit()
        return cls(store, plan)

    def decision(self, key: str, parent: str | None = None) -> Decision:
        decision = Decision(
            plan_id=self.plan.plan_id,
            parent_decision_id=self.ids[parent] if parent else None,
            sequence_number=self.sequence,
            decision_type=(
                DecisionType.IMPLEMENTATION_CHOICE if parent else DecisionType.PROMPT_DEFINITION
            ),
            phase=Phase.EXECUTE if parent else Phase.STRATEGIZE,
            question=f"what about {key}?",
            chosen_option=key,
        )
        self.sequence += 1
        self.ids[key] = decision.decision_id
        return decision

    def add(self, key: str, parent: str | None = None, depends_on: Sequence[str] = ()) -> None:
        decision = self.decision(key, parent)
        with self.store.unit_of_work(write=True) as uow:
            uow.decisions.add(decision)
            uow.flush()
            for upstream in depends_on:
                uow.decisions.add_dependency(_influence(self.ids[upstream], decision.decision_id))
            uow.commit()

    def depend(self, upstream: str, downstream: str) -> None:
        with self.store.unit_of_work(write=True) as uow:
            uow.decisions.add_dependency(_influence(self.ids[upstream], self.ids[downstream]))
            uow.commit()

    def supersede(self, keys: Iterable[str], by: str) -> None:
        with self.store.unit_of_work(write=True) as uow:
            uow.decisions.supersede([self.ids[k] for k in keys], self.ids[by])
            uow.commit()

    def keys(self, ids: Iterable[str]) -> set[str]:
        names = {v: k for k, v in self.ids.items()}
        return {names.get(i, i) for i in ids}


def _influence(upstream: str, downstream: str) -> DecisionDependency:
    return DecisionDependency(
        upstream_decision_id=upstream,
        downstream_ref=downstream,
        dependency_type=DependencyType.DECISION,
    )


def all_three(store: Store, plan_id: str, decision_id: str) -> AffectedSubtree:
    """The cold, warm and reference answers, asserted equal; returns the one answer."""
    cold = affected_subtree(store, decision_id)
    warm = InfluenceGraph.load(store, plan_id).affected(decision_id)
    reference = reference_affected(store, decision_id)
    assert cold == warm == reference
    return cold


@pytest.fixture
def tree(store: Store) -> PlanBuilder:
    """A plan of two branches under the root::

    root ─ a ─ a1 ─ a11
         │    └ a2
         └ b ─ b1 ─ b11
    """
    plan = PlanBuilder.create(store)
    plan.add("root")
    for key, parent in [
        ("a", "root"),
        ("a1", "a"),
        ("a11", "a1"),
        ("a2", "a"),
        ("b", "root"),
        ("b1", "b"),
        ("b11", "b1"),
    ]:
        plan.add(key, parent)
    return plan


def affected_keys(plan: PlanBuilder, key: str) -> set[str]:
    subtree = all_three(plan.store, plan.plan.plan_id, plan.ids[key])
    return plan.keys(subtree.decisions)


# -- the ADR's examples -----------------------------------------------------------------------


def test_structural_children_transitively(tree: PlanBuilder) -> None:
    assert affected_keys(tree, "a") == {"a", "a1", "a11", "a2"}
    assert affected_keys(tree, "b1") == {"b1", "b11"}
    assert affected_keys(tree, "root") == set(tree.ids)


def test_a_leaf_affects_only_itself(tree: PlanBuilder) -> None:
    subtree = all_three(tree.store, tree.plan.plan_id, tree.ids["a11"])
    assert subtree == AffectedSubtree(frozenset({tree.ids["a11"]}), frozenset())


def test_influence_edges_cross_branches(tree: PlanBuilder) -> None:
    tree.depend("a1", "b1")  # b1 relied on a1: correcting a1 redoes b1 and what hangs below it
    assert affected_keys(tree, "a1") == {"a1", "a11", "b1", "b11"}
    assert affected_keys(tree, "b") == {"b", "b1", "b11"}  # edges are followed downstream only


def test_influence_to_a_later_sibling_subtree_and_onwards(tree: PlanBuilder) -> None:
    tree.depend("a2", "b")
    tree.depend("b11", "a11")  # an edge back into the a-branch, to an earlier decision's child
    assert affected_keys(tree, "a2") == {"a2", "b", "b1", "b11", "a11"}


def test_a_diamond_is_counted_once(tree: PlanBuilder) -> None:
    tree.add("join", "a11", depends_on=["a2"])  # reachable through a1 → a11 and through a2
    tree.add("after", "join", depends_on=["a1"])
    subtree = all_three(tree.store, tree.plan.plan_id, tree.ids["a"])
    assert tree.keys(subtree.decisions) == {"a", "a1", "a11", "a2", "join", "after"}
    assert affected_keys(tree, "a2") == {"a2", "join", "after"}


def test_dependency_on_an_earlier_decision_does_not_reach_back(tree: PlanBuilder) -> None:
    tree.add("c", "b11", depends_on=["a1", "root"])  # a later decision relying on earlier ones
    assert affected_keys(tree, "c") == {"c"}
    assert affected_keys(tree, "a1") == {"a1", "a11", "c"}


def test_superseded_decisions_are_not_followed(tree: PlanBuilder) -> None:
    tree.depend("b1", "a11")
    tree.add("a1_new", "a")  # a correction of a1 made a replacement ...
    tree.supersede(["a1", "a11"], by="a1_new")  # ... and superseded a1's subtree
    # a11 stays a dependent of b1 in the table, but is history now: neither kind of edge
    # leads into it (the ADR's text filters children only; see engine/core/impact.py).
    assert affected_keys(tree, "a") == {"a", "a2", "a1_new"}
    assert affected_keys(tree, "b1") == {"b1", "b11"}


def test_the_target_is_included_even_when_superseded(tree: PlanBuilder) -> None:
    tree.add("b_new", "root")
    tree.supersede(["b1"], by="b_new")
    # b1's current child is still b11 (only b1 was superseded here)
    assert affected_keys(tree, "b1") == {"b1", "b11"}


def test_child_plans_are_collected_from_plan_edges(tree: PlanBuilder) -> None:
    store = tree.store
    child = PlanBuilder.create(store, parent=tree, by="a1")
    child.add("c_root")
    child.add("c1", "c_root")
    grandchild = PlanBuilder.create(store, parent=child, by="c1")
    other = PlanBuilder.create(store, parent=tree, by="b")
    subtree = all_three(store, tree.plan.plan_id, tree.ids["a"])
    # the child plan is listed; its own decisions are cancelled with it, so not listed
    assert subtree.plans == {child.plan.plan_id}
    assert tree.keys(subtree.decisions) == {"a", "a1", "a11", "a2"}
    assert all_three(store, tree.plan.plan_id, tree.ids["root"]).plans == {
        child.plan.plan_id,
        other.plan.plan_id,
    }
    assert all_three(store, child.plan.plan_id, child.ids["c_root"]).plans == {
        grandchild.plan.plan_id
    }


def test_influence_into_another_plan_is_followed_and_loaded(tree: PlanBuilder) -> None:
    store = tree.store
    child = PlanBuilder.create(store, parent=tree, by="a1")
    child.add("c_root")
    child.add("c1", "c_root")
    sibling = PlanBuilder.create(store, parent=tree, by="b")
    sibling.add("s_root")
    sibling.add("s1", "s_root")
    with store.unit_of_work(write=True) as uow:  # a child decision relied on a sibling's
        uow.decisions.add_dependency(_influence(child.ids["c1"], sibling.ids["s_root"]))
        uow.commit()
    subtree = all_three(store, child.plan.plan_id, child.ids["c1"])
    assert subtree.decisions == {child.ids["c1"], sibling.ids["s_root"], sibling.ids["s1"]}
    graph = InfluenceGraph.load(store, child.plan.plan_id)
    assert sibling.plan.plan_id in graph.plan_ids  # loaded because an edge leads there
    assert tree.plan.plan_id not in graph.plan_ids  # nothing leads to the parent plan
    full = InfluenceGraph.load(store, tree.plan.plan_id)
    assert full.plan_ids == {tree.plan.plan_id, child.plan.plan_id, sibling.plan.plan_id}


def test_unknown_decision_and_plan(store: Store) -> None:
    plan = PlanBuilder.create(store)
    plan.add("root")
    missing = new_ulid()
    with pytest.raises(NotFoundError, match="does not exist"):
        affected_subtree(store, missing)
    with pytest.raises(NotFoundError, match="not in the influence graph"):
        InfluenceGraph.load(store, plan.plan.plan_id).affected(missing)
    with pytest.raises(NotFoundError, match="does not exist"):
        InfluenceGraph.load(store, new_ulid())


def test_graph_attributes(tree: PlanBuilder) -> None:
    tree.depend("a1", "b1")
    tree.add("x", "a")
    tree.supersede(["a2"], by="x")
    graph = InfluenceGraph.load(tree.store, tree.plan.plan_id)
    ids = tree.ids
    assert len(graph) == len(ids) and ids["a"] in graph
    assert graph.graph.edges[ids["a"], ids["a1"]] == {"child": True}
    assert graph.graph.edges[ids["a1"], ids["b1"]] == {"influence": True}
    assert graph.graph.nodes[ids["a2"]] == {"plan_id": tree.plan.plan_id, "current": False}
    assert not graph.is_current(ids["a2"]) and graph.is_current(ids["a"])


# -- random plans: warm == cold == reference, and incremental == fresh load ---------------------


@dataclass(frozen=True)
class RandomPlan:
    parents: list[int]  # parents[n - 1] is the parent of decision n (decision 0 is the root)
    influences: list[tuple[int, int]]  # (upstream, downstream), upstream < downstream
    spawns: list[int]  # decisions that spawned a child plan
    superseded: list[int]  # decisions superseded (by the last decision)


@st.composite
def random_plans(draw: st.DrawFn) -> RandomPlan:
    count = draw(st.integers(1, 14))
    parents = [draw(st.integers(0, n - 1)) for n in range(1, count)]
    pairs = [(u, d) for d in range(count) for u in range(d)]
    influences = draw(st.lists(st.sampled_from(pairs), max_size=10, unique=True)) if pairs else []
    spawns = draw(st.lists(st.integers(0, count - 1), max_size=3, unique=True))
    superseded = (
        draw(st.lists(st.integers(0, count - 2), max_size=4, unique=True)) if count > 1 else []
    )
    return RandomPlan(parents, influences, spawns, superseded)


def write_random_plan(store: Store, shape: RandomPlan) -> tuple[PlanBuilder, list[str]]:
    plan = PlanBuilder.create(store)
    plan.add("0")
    for n, parent in enumerate(shape.parents, start=1):
        plan.add(str(n), str(parent))
    for upstream, downstream in shape.influences:
        plan.depend(str(upstream), str(downstream))
    for spawner in shape.spawns:
        PlanBuilder.create(store, parent=plan, by=str(spawner))
    if shape.superseded:
        plan.supersede([str(n) for n in shape.superseded], by=str(len(shape.parents)))
    return plan, [plan.ids[str(n)] for n in range(len(shape.parents) + 1)]


RANDOM = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@RANDOM
@given(shape=random_plans())
def test_warm_equals_cold_equals_reference_on_random_plans(store: Store, shape: RandomPlan) -> None:
    plan, ids = write_random_plan(store, shape)
    graph = InfluenceGraph.load(store, plan.plan.plan_id)
    for decision_id in ids:
        warm = graph.affected(decision_id)
        assert warm == affected_subtree(store, decision_id)
        assert warm == reference_affected(store, decision_id)


def snapshot(graph: InfluenceGraph) -> tuple[object, ...]:
    nx_graph = graph.graph
    return (
        sorted(nx_graph.nodes(data=True)),
        sorted((u, v, sorted(a.items())) for u, v, a in nx_graph.edges(data=True)),
        sorted((d, sorted(graph.child_plans(d))) for d in nx_graph if graph.child_plans(d)),
        graph.plan_ids,
    )


@RANDOM
@given(shape=random_plans())
def test_incremental_updates_equal_a_fresh_load(store: Store, shape: RandomPlan) -> None:
    plan = PlanBuilder.create(store)
    plan.add("0")
    graph = InfluenceGraph.load(store, plan.plan.plan_id)  # the runner's graph, kept current
    influences: dict[int, list[int]] = {}
    for upstream, downstream in shape.influences:
        influences.setdefault(downstream, []).append(upstream)
    spawned = set(shape.spawns)
    if 0 in spawned:
        child = PlanBuilder.create(store, parent=plan, by="0")
        graph.add_child_plan(plan.ids["0"], child.plan.plan_id)
    for n, parent in enumerate(shape.parents, start=1):
        depends_on = [str(u) for u in influences.get(n, [])]
        plan.add(str(n), str(parent), depends_on=depends_on)
        with store.unit_of_work() as uow:
            recorded = uow.decisions.get(plan.ids[str(n)])
        graph.add_decision(recorded, [plan.ids[k] for k in depends_on])
        if n in spawned:
            child = PlanBuilder.create(store, parent=plan, by=str(n))
            graph.add_child_plan(plan.ids[str(n)], child.plan.plan_id)
    if shape.superseded:
        plan.supersede([str(n) for n in shape.superseded], by=str(len(shape.parents)))
        graph.supersede([plan.ids[str(n)] for n in shape.superseded])
    fresh = InfluenceGraph.load(store, plan.plan.plan_id)
    assert snapshot(graph) == snapshot(fresh)
    for decision_id in plan.ids.values():
        assert graph.affected(decision_id) == affected_subtree(store, decision_id)


def test_add_decision_of_a_plan_the_graph_does_not_hold(store: Store) -> None:
    plan = PlanBuilder.create(store)
    plan.add("0")
    graph = InfluenceGraph.load(store, plan.plan.plan_id)
    stranger = PlanBuilder.create(store)
    with pytest.raises(ValueError, match="does not hold"):
        graph.add_decision(stranger.decision("s"))
    graph.supersede([new_ulid()])  # unknown ids are ignored
    assert graph.is_current(plan.ids["0"])
