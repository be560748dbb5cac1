"""What the plan screen's loading thread reads, and how little: the event loop only patches
the tree with the result (docs/benchmarks.md, "tui").

- The first load reads only the first :data:`FIRST_ROWS` decisions recorded (the top of the
  tree: a parent is recorded before its children), so the tree paints while the rest load.
- Every later load reads only the decisions recorded after those shown (a running plan
  adds a few; a pause, an event or an answered approval none) and adds them to the tree
  shown. Decisions are append-only and superseded once, so the plan's counts tell whether
  anything else changed (a correction superseded some): only then is the whole tree read.
"""

from __future__ import annotations

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine import pending_approvals
from cleveragents_tui.engine.read import tui_queries
from cleveragents_tui.engine.read.tui_queries import TreeRead
from cleveragents_tui.engine.run.approvals import goes_on_with_a_run
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import PlanData, Watermark
from cleveragents_tui.tui.widgets.decision_tree import TreeIndex

FIRST_ROWS = 150  # decisions painted before the rest are read: three screens of a tall terminal

# What a load arranged for the tree: the rows' read, how far they go, the tree, the rows
# shown whose label changed (None: rebuild) and the child lists that grew (None: any).
_Arranged = tuple[TreeRead, Watermark, TreeIndex, list[str] | None, list[str | None] | None]


def read_plan_data(
    store: Store,
    plan_id: str,
    show_superseded: bool,
    shown: TreeIndex | None,
    last: PlanData | None,
) -> PlanData:
    """The plan screen's data, arranged against the tree ``shown``; ``last`` is the data
    shown before (None: the first load, which reads only the first decisions)."""
    fingerprint = tui_queries.fingerprint(store)
    arranged = _appended(store, plan_id, show_superseded, shown, last)
    if arranged is None:
        arranged = _whole(store, plan_id, show_superseded, shown, first=last is None)
    read, mark, index, changed, grown = arranged
    pending = pending_approvals(store, plan_id, family=True)  # what its run waits on
    events = tui_queries.recent_events(store, plan_id, limit=1)
    return PlanData(
        read.plan,
        show_superseded,
        pending,
        events,
        index,
        shown,
        changed,
        grown,
        fingerprint,
        read.counts,
        mark,
        partial=mark.rows < read.counts[0],
        goes_on_with_a_run=goes_on_with_a_run(store, read.plan, len(pending)),
    )


def _appended(
    store: Store,
    plan_id: str,
    show_superseded: bool,
    shown: TreeIndex | None,
    last: PlanData | None,
) -> _Arranged | None:
    """The tree shown with the decisions recorded since it was read added; None when
    anything else changed (the whole tree is read again)."""
    if (
        last is None
        or shown is None
        or last.index is not shown
        or last.show_superseded != show_superseded
    ):
        return None
    read = tui_queries.tree_read(store, plan_id, show_superseded, after=last.read.through)
    mark = last.read.plus(read.rows)
    if read.counts != (mark.rows, mark.rows - mark.superseded):
        return None  # a decision shown was superseded (a correction)
    if show_superseded and mark.superseded:
        return None  # a decision recorded may replace one shown superseded: names change
    extended = last.index.extended(_shown(read.rows, show_superseded), read.checkpoints)
    if extended is None:
        return None
    index, changed, grown = extended
    if not shown.rows:  # nothing was shown: laid out anew, the cursor on the first row
        return read, mark, index, None, None
    return read, mark, index, changed, grown


def _whole(
    store: Store, plan_id: str, show_superseded: bool, shown: TreeIndex | None, first: bool
) -> _Arranged:
    """The whole tree read (with ``first``, only its first decisions), compared with the
    one shown."""
    read = tui_queries.tree_read(
        store, plan_id, show_superseded, first=FIRST_ROWS if first else None
    )
    index = TreeIndex.of(_shown(read.rows, show_superseded), read.checkpoints)
    return read, Watermark().plus(read.rows), index, index.changed_since(shown), None


def _shown(rows: list[TreeRow], show_superseded: bool) -> list[TreeRow]:
    return rows if show_superseded else [row for row in rows if row.superseded_by is None]
