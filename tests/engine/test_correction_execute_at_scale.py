"""A correction's execute writes the affected set in a fixed number of statements (issue 22).

Superseding, forking, lapsing the old attempt's approvals and marking destroyed savepoints
are bulk statements, and the steps between the rollback and the replay commit together:
the statements a revert sends (SQLAlchemy's ``before_cursor_execute``, its replay included)
are counted on a plan of 100 and one of 1,000 decisions, on SQLite and PostgreSQL,
reverting the first Execute decision (it affects nearly all of them). The count must be the
same, and the revert must have done what it says: every affected decision superseded by
the guidance, the correction succeeded, its progress recorded.
"""

from __future__ import annotations

from pathlib import Path

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionResult
from cleveragents_tui.engine.correct.preview import preview
from tests.support.scale_plan import ScalePlan, build
from tests.support.statements import sent_statements


def _counted_revert(scale: ScalePlan) -> tuple[CorrectionResult, tuple[str, ...], int]:
    impact = preview(
        scale.store,
        scale.ids[0],
        CorrectionMode.REVERT,
        "make it loud",
        sandbox_base=scale.options.sandbox_base,
    )
    with sent_statements(scale.store.engine) as statements:
        result = execute(
            scale.store, impact, acknowledged=True, requested_by="test", options=scale.options
        )
    return result, impact.affected_decisions, len(statements)


def test_a_revert_sends_as_many_statements_for_1000_decisions_as_for_100(
    tmp_path: Path, db_url: str
) -> None:
    counts = {}
    for size in (100, 1_000):
        scale = build(tmp_path / str(size), size, db_url)
        try:
            result, affected, counts[size] = _counted_revert(scale)
            assert result.correction.status is CorrectionStatus.SUCCEEDED
            assert result.plan.state is PlanState.AWAITING_APPROVAL  # replayed to the gate
            guidance = result.correction.replacement_decision_id
            with scale.store.unit_of_work() as uow:
                rows = uow.decisions.tree_rows(scale.plan_id, include_superseded=True)
                superseded_events = uow.events.payloads(scale.plan_id, "decisions_superseded")
                rolled_back = uow.events.payloads(scale.plan_id, "resources_rolled_back")
            by = {r.decision_id: r.superseded_by for r in rows}
            assert set(scale.ids) <= set(affected)
            assert {by[d] for d in affected} == {guidance}  # every one, by the guidance
            assert len(rolled_back) == 1
            assert superseded_events == [{"count": len(affected), "replacement": guidance}]
        finally:
            scale.store.close()
    assert counts[100] == counts[1_000], counts
