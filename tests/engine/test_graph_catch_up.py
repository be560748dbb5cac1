"""The app's open influence graph catching up with another process (engine/core/influence.py,
``OpenGraphs.catch_up``): decisions appended are read into it, anything else reads it again;
either way it equals a fresh load, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cleveragents_tui.engine.core.impact import InfluenceGraph
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.store.store import Store
from tests.engine.test_impact import RANDOM, PlanBuilder, RandomPlan, random_plans, snapshot


@pytest.fixture(autouse=True)
def no_graph_left_open() -> Iterator[None]:
    yield
    for plan_id in list(OPEN_GRAPHS._graphs):
        OPEN_GRAPHS.close(plan_id)


def _write(plan: PlanBuilder, shape: RandomPlan, keys: range) -> None:
    """Decisions ``keys`` of ``shape`` as another process records them: each with the
    influences it declares."""
    for n in keys:
        ups = [str(u) for u, d in shape.influences if d == n]
        plan.add(str(n), str(shape.parents[n - 1]) if n else None, depends_on=ups)


@RANDOM
@given(shape=random_plans(), split=st.integers(1, 14), later=st.booleans())
def test_a_graph_caught_up_equals_a_fresh_load(
    store: Store, shape: RandomPlan, split: int, later: bool
) -> None:
    """The graph is opened after ``split`` decisions; the rest are recorded by another
    process, then (``later``) child plans spawned and decisions superseded."""
    count = len(shape.parents) + 1
    split = min(split, count)
    plan = PlanBuilder.create(store)
    _write(plan, shape, range(split))
    opened = OPEN_GRAPHS.open(store, plan.plan.plan_id)
    _write(plan, shape, range(split, count))
    if later:
        for spawner in shape.spawns:
            PlanBuilder.create(store, parent=plan, by=str(spawner))
        if shape.superseded:
            plan.supersede([str(n) for n in shape.superseded], by=str(count - 1))

    caught = OPEN_GRAPHS.catch_up(store, plan.plan.plan_id)

    assert snapshot(caught) == snapshot(InfluenceGraph.load(store, plan.plan.plan_id))
    assert OPEN_GRAPHS.holding(plan.plan.plan_id) is caught
    if not later or not (shape.spawns or shape.superseded):  # appends only: not read again
        assert caught is opened


def test_an_edge_added_between_older_decisions_reads_the_graph_again(store: Store) -> None:
    """A dependency row leaving a decision the graph holds, with no decision recorded
    (as a child plan's spawn adds one): the appended rows cannot show it."""
    plan = PlanBuilder.create(store)
    plan.add("0")
    plan.add("1", "0")
    plan.add("2", "0")
    opened = OPEN_GRAPHS.open(store, plan.plan.plan_id)
    plan.depend("1", "2")
    caught = OPEN_GRAPHS.catch_up(store, plan.plan.plan_id)
    assert caught is not opened
    assert plan.keys(caught.affected(plan.ids["1"]).decisions) == {"1", "2"}


def test_catching_up_a_graph_not_open_opens_it(store: Store) -> None:
    plan = PlanBuilder.create(store)
    plan.add("0")
    graph = OPEN_GRAPHS.catch_up(store, plan.plan.plan_id)
    assert OPEN_GRAPHS.holding(plan.plan.plan_id) is graph and plan.ids["0"] in graph


def test_decisions_another_process_records_in_a_child_plan_are_caught_up(store: Store) -> None:
    """The app shows the parent; a child plan it spawned runs on in another process. The
    graph opened before holds the child plan too (the app's previews of the child's
    decisions are answered from it), so it must gain the child's new decisions."""
    plan = PlanBuilder.create(store)
    plan.add("0")
    plan.add("1", "0")
    child = PlanBuilder.create(store, parent=plan, by="1")
    child.add("c0")
    OPEN_GRAPHS.open(store, plan.plan.plan_id)
    child.add("c1", "c0")
    child.add("c2", "c1")
    plan.add("2", "1")  # the parent's own appends too

    caught = OPEN_GRAPHS.catch_up(store, plan.plan.plan_id)

    assert snapshot(caught) == snapshot(InfluenceGraph.load(store, plan.plan.plan_id))
    assert child.keys(caught.affected(child.ids["c1"]).decisions) == {"c1", "c2"}


def test_a_plans_own_graph_answers_for_it_before_a_parents(store: Store) -> None:
    """The app showed the parent (its graph stays open under the child's screen), then the
    child: the child's graph, the one caught up while it is shown, answers its previews."""
    plan = PlanBuilder.create(store)
    plan.add("0")
    child = PlanBuilder.create(store, parent=plan, by="0")
    child.add("c0")
    OPEN_GRAPHS.open(store, plan.plan.plan_id)
    own = OPEN_GRAPHS.open(store, child.plan.plan_id)
    child.add("c1", "c0")
    OPEN_GRAPHS.catch_up(store, child.plan.plan_id)
    assert OPEN_GRAPHS.holding(child.plan.plan_id) is own
    assert child.ids["c1"] in own.affected(child.ids["c0"]).decisions
