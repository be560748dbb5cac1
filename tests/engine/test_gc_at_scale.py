"""`agents gc` on a large plan reads the live checkpoints of superseded decisions and the
current decisions' light rows, never every decision of the plan whole (issue 22): on a
100,000-decision plan that reading took 8 s before it found nothing to collect."""

from __future__ import annotations

import re
from pathlib import Path

from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.ops.cleanup import collectable
from tests.support.scale_plan import build, revert_preview
from tests.support.statements import sent_statements

# Every decision of the plan read whole (for_plan's statement): the plan alone filters it.
EVERY_DECISION_WHOLE = re.compile(
    r"decisions\.question\b.*WHERE decisions\.plan_id = \S+\s+ORDER BY", re.DOTALL
)


def test_gc_reads_no_plans_every_decision_whole(tmp_path: Path, db_url: str) -> None:
    scale = build(tmp_path, 1_000, db_url)
    try:
        impact = revert_preview(scale, scale.ids[0])  # supersedes every Execute decision
        execute(scale.store, impact, acknowledged=True, requested_by="t", options=scale.options)
        with sent_statements(scale.store.engine) as statements:
            found = collectable(scale.store, retention_days=0)
    finally:
        scale.store.close()
    assert found  # the action's steps checkpointed their writes, now superseded
    assert {c.plan_id for c in found} == {scale.plan_id}
    assert not [s for s in statements if EVERY_DECISION_WHOLE.search(s)], statements
