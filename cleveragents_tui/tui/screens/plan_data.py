"""What the plan screen's loading thread reads, and how little: the event loop only patches
the tree with the result (docs/benchmarks.md, "tui").

- The first load reads only the first :data:`FIRST_ROWS` decisions recorded (the top of the
  tree: a parent is recorded before its children), so the tree paints while the rest load.
- A refresh whose plan kept the same decisions (a pause, an event, an answered approval
  elsewhere) reads the plan and its status, not its 10,000 decisions again.
"""

from __future__ import annotations

from dataclasses import replace

from cleveragents_tui.engine import pending_approvals, plan_tree
from cleveragents_tui.engine.read import tui_queries
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import PlanData
from cleveragents_tui.tui.widgets.decision_tree import TreeIndex

FIRST_ROWS = 150  # decisions painted before the rest are read: three screens of a tall terminal


def read_plan_data(
    store: Store,
    plan_id: str,
    show_superseded: bool,
    shown: TreeIndex | None,
    last: PlanData | None,
) -> PlanData:
    """The plan screen's data, arranged against the tree ``shown``; ``last`` is the data
    shown before (None: the first load, which reads only the first decisions)."""
    changed: list[str] | None
    fingerprint = tui_queries.fingerprint(store)
    counts = tui_queries.decision_counts(store, plan_id)
    if (
        last is not None
        and not last.partial
        and last.counts == counts
        and last.tree.show_superseded == show_superseded
        and last.index is shown
    ):
        tree = replace(last.tree, plan=tui_queries.plan(store, plan_id))
        index, changed, first = last.index, [], None
    else:
        first = FIRST_ROWS if last is None and counts[0] > FIRST_ROWS else None
        tree = plan_tree(store, plan_id, show_superseded=show_superseded, first=first)
        index = TreeIndex.of(tree)
        changed = index.changed_since(shown)
    pending = pending_approvals(store, plan_id)
    events = tui_queries.recent_events(store, plan_id, limit=1)
    return PlanData(
        tree,
        pending,
        events,
        index,
        shown,
        changed,
        fingerprint,
        counts,
        partial=first is not None,
    )
