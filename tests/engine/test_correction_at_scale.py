"""A correction's preview reads the affected set in a fixed number of statements (issue 22).

Reading per affected decision (a query for each one's tool calls, a transaction per child
plan) made a preview of a 10,000-decision plan take tens of seconds. Here the statements a
preview sends are counted (SQLAlchemy's ``before_cursor_execute``) on a plan of 100 and one
of 1,000 decisions, on SQLite and PostgreSQL, reverting the first Execute decision (it affects nearly all of them):
the count must be the same, and the preview must still say what the correction does.
"""

from __future__ import annotations

from pathlib import Path

from cleveragents_tui.engine.correct.model import Impact, IrreversibleEffect
from tests.support.scale_plan import API, FILES, ScalePlan, build, revert_preview
from tests.support.statements import sent_statements


def _counted_preview(scale: ScalePlan) -> tuple[Impact, int]:
    with sent_statements(scale.store.engine) as statements:
        impact = revert_preview(scale, scale.ids[0])
    return impact, len(statements)


def test_the_preview_sends_as_many_statements_for_1000_decisions_as_for_100(
    tmp_path: Path, db_url: str
) -> None:
    counts = {}
    for size in (100, 1_000):
        scale = build(tmp_path / str(size), size, db_url)
        try:
            impact, counts[size] = _counted_preview(scale)
        finally:
            scale.store.close()
        bulk = set(scale.ids)
        assert bulk <= set(impact.affected_decisions)  # the whole tree under the target
        # every twentieth bulk decision made one irreversible call; every tenth wrote to API
        notified = (len(scale.ids) - 1) // 20
        assert impact.irreversible == (
            IrreversibleEffect("local/notify", notified, ("sends a message",)),
        )
        assert impact.non_rollbackable == (API,)
        assert FILES in impact.rollbackable
        assert impact.remade  # the later steps wrote to the files: made again
    assert counts[100] == counts[1_000], counts
