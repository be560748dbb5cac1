"""A correction's preview is a snapshot read in one transaction and a pure function of it
(engine/correct/snapshot.py, engine/correct/assess.py; issue 19).

Two properties, each drawn by Hypothesis:

- On a real plan (SQLite): a random tree of decisions is added under its first Execute
  decision — structural children, extra influence edges, some decisions superseded, tool
  calls on the plan's directory sandbox and on its ``none`` resource, some irreversible —
  and one of its current decisions is previewed for a revert. The preview's affected
  decisions are exactly the closure worked out here, independently, from the rows inserted
  (children and dependents, never entering a superseded decision); the irreversible effects
  and the ``none`` resource written are exactly those of the affected decisions' calls; a
  leaf affects only itself.
- On snapshots: ``impact_of`` counts only the affected decisions' calls, whatever calls of
  other decisions the snapshot holds, and gives the same impact for the same snapshot.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import insert

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.engine.correct import snapshot as snapshots
from cleveragents_tui.engine.correct.assess import impact_of
from cleveragents_tui.engine.correct.model import CorrectionRequest, IrreversibleEffect
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.store.tables import DecisionDependencyRow, DecisionRow, ToolInvocationRow
from tests.support.scale_plan import API, FILES, ScalePlan, build

NOTIFY = "local/notify"
EFFECTS = ("sends a message",)


@dataclass(frozen=True)
class Tree:
    """A random tree of decisions as drawn: node n > 0 has ``parents[n]`` < n; node 0 hangs
    under the plan's first Execute decision."""

    parents: tuple[int, ...]  # parents[0] is unused
    influence: tuple[tuple[int, int], ...]  # (upstream, downstream), upstream < downstream
    superseded: frozenset[int]
    calls: tuple[tuple[int, str, bool], ...]  # (node, resource, irreversible)
    target: int

    def closure(self) -> set[int]:
        """The affected subtree as ADR-035 defines it, walked here over the drawn edges."""
        following: dict[int, set[int]] = {}
        for node, parent in enumerate(self.parents):
            if node:
                following.setdefault(parent, set()).add(node)
        for up, down in self.influence:
            following.setdefault(up, set()).add(down)
        seen, queue = {self.target}, [self.target]
        for node in queue:
            for nxt in following.get(node, ()):
                if nxt not in seen and nxt not in self.superseded:
                    seen.add(nxt)
                    queue.append(nxt)
        return seen

    def is_leaf(self, node: int) -> bool:
        return node not in self.parents[1:] and all(up != node for up, _ in self.influence)


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    size = draw(st.integers(1, 12))
    parents = (0, *(draw(st.integers(0, n - 1)) for n in range(1, size)))
    pairs = [(u, d) for d in range(1, size) for u in range(d) if u != parents[d]]
    influence = (
        tuple(draw(st.lists(st.sampled_from(pairs), unique=True, max_size=6))) if pairs else ()
    )
    superseded = frozenset(draw(st.sets(st.integers(0, size - 1), max_size=size // 3)))
    current = [n for n in range(size) if n not in superseded]
    if not current:
        superseded, current = frozenset(), list(range(size))
    # an irreversible call notifies through the ``none`` resource; a call on the directory
    # sandbox records no side effect (a side effect there would make its decision a later
    # writer of the rolled-back sandbox, re-made: another rule, tested elsewhere)
    calls = tuple(
        draw(
            st.lists(
                st.tuples(
                    st.integers(0, size - 1), st.sampled_from([FILES, API]), st.booleans()
                ).map(lambda c: (c[0], c[1], c[2] and c[1] == API)),
                max_size=10,
            )
        )
    )
    return Tree(parents, influence, superseded, calls, draw(st.sampled_from(current)))


_SEQUENCE = itertools.count(1_000_000)  # above every decision the plan made itself


def insert_tree(scale: ScalePlan, tree: Tree) -> list[str]:
    """The tree's rows, with fresh ids, in one transaction; returns the ids by node."""
    ids = [new_ulid() for _ in tree.parents]
    root = scale.ids[0]
    now = datetime.now(UTC)
    decisions = [
        {
            "decision_id": ids[n],
            "plan_id": scale.plan_id,
            "parent_decision_id": ids[parent] if n else root,
            "sequence_number": next(_SEQUENCE),
            "decision_type": "implementation_choice",
            "phase": "execute",
            "question": f"question {n}",
            "chosen_option": f"option {n}",
            "alternatives_considered": "[]",
            "relevant_resources": "[]",
            "created_at": now,
            "is_correction": False,
            # what superseded it does not matter here, only that something did
            "superseded_by": root if n in tree.superseded else None,
        }
        for n, parent in enumerate(tree.parents)
    ]
    edges = [
        {"upstream_decision_id": ids[u], "downstream_ref": ids[d], "dependency_type": "decision"}
        for u, d in tree.influence
    ]
    calls = [
        {
            "invocation_id": new_ulid(),
            "plan_id": scale.plan_id,
            "decision_id": ids[n],
            "tool": NOTIFY if irreversible else "local/call",
            "arguments": f'{{"resource": "{resource}"}}',
            "side_effects": '["sends a message"]' if irreversible else "[]",
            "irreversible": irreversible,
            "created_at": now,
            "ok": True,
            "output": "",
        }
        for n, resource, irreversible in tree.calls
    ]
    with scale.store.engine.begin() as connection:
        for rows, table in ((decisions, DecisionRow), (edges, DecisionDependencyRow)):
            if rows:
                connection.execute(insert(table), rows)
        if calls:
            connection.execute(insert(ToolInvocationRow), calls)
    return ids


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScalePlan]:
    """A plan run to its Apply gate (tests/support/scale_plan.py); each drawn tree is added
    to it under its first Execute decision, apart from the trees drawn before."""
    scale = build(tmp_path_factory.mktemp("assess") / "plan", 1)
    yield scale
    scale.store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=trees())
def test_the_preview_affects_exactly_the_closure_and_counts_only_its_calls(
    plan: ScalePlan, tree: Tree
) -> None:
    ids = insert_tree(plan, tree)
    impact = preview(
        plan.store,
        ids[tree.target],
        CorrectionMode.REVERT,
        "make it loud",
        sandbox_base=plan.options.sandbox_base,
    )
    closure = tree.closure()
    assert set(impact.affected_decisions) == {ids[n] for n in closure}
    notified = sum(1 for n, _, irreversible in tree.calls if irreversible and n in closure)
    assert impact.irreversible == (
        (IrreversibleEffect(NOTIFY, notified, EFFECTS),) if notified else ()
    )
    wrote_api = any(n in closure and resource == API for n, resource, _ in tree.calls)
    assert impact.non_rollbackable == ((API,) if wrote_api else ())
    assert FILES in impact.rollbackable
    snapshot = snapshots.load(
        plan.store,
        CorrectionRequest(
            ids[tree.target],
            CorrectionMode.REVERT,
            "make it loud",
            sandbox_base=plan.options.sandbox_base,
        ),
    )
    assert snapshot.rollback is not None  # the loader's, used by impact_of: the same as its own
    unworked = impact_of(replace(snapshot, rollback=None), CorrectionMode.REVERT, "make it loud")
    assert unworked == impact_of(snapshot, CorrectionMode.REVERT, "make it loud") == impact
    if tree.is_leaf(tree.target):
        assert impact.affected_decisions == (ids[tree.target],)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(
        st.tuples(st.integers(0, 9), st.sampled_from(["local/a", "local/b"]), st.booleans()),
        max_size=20,
    ),
    none_writes=st.lists(st.tuples(st.integers(0, 9), st.sampled_from([API])), max_size=5),
    affected=st.sets(st.integers(1, 9), max_size=9),
)
def test_impact_of_counts_only_the_affected_decisions_calls(
    plan: ScalePlan,
    calls: list[tuple[int, str, bool]],
    none_writes: list[tuple[int, str]],
    affected: set[int],
) -> None:
    base = snapshots.load(
        plan.store,
        CorrectionRequest(
            plan.ids[0],
            CorrectionMode.REVERT,
            "make it loud",
            sandbox_base=plan.options.sandbox_base,
        ),
    )
    target = base.decision.decision_id
    names = [target, *(f"other-{n}" for n in range(1, 10))]
    inside = {0} | affected  # node 0: the target, always affected
    drawn = replace(
        base,
        subtree=replace(base.subtree, decisions=frozenset(names[n] for n in inside)),
        writes=(),
        followers=frozenset(),
        irreversible=tuple((names[n], tool, EFFECTS) for n, tool, flag in calls if flag),
        none_writes=tuple((names[n], r) for n, r in none_writes),
    )
    impact = impact_of(drawn, CorrectionMode.REVERT, "make it loud")
    assert set(impact.affected_decisions) == {names[n] for n in inside}
    counts = Counter(tool for n, tool, flag in calls if flag and n in inside)
    assert {e.tool: e.invocations for e in impact.irreversible} == dict(counts)
    wrote = any(n in inside for n, _ in none_writes)
    assert (API in impact.non_rollbackable) is wrote
    assert impact_of(drawn, CorrectionMode.REVERT, "make it loud") == impact  # pure
