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
from typing import Any

import pytest

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.enums import CorrectionStatus, PlanState
from cleveragents_tui.engine.core.replay_snapshots import snapshots_of
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionResult
from cleveragents_tui.store import mapping
from cleveragents_tui.store.correction_queries import superseded_by_any
from tests.support.scale_plan import ScalePlan, add_pruned_groups, build, revert_preview
from tests.support.statements import sent_statements


def _counted_revert(scale: ScalePlan) -> tuple[CorrectionResult, tuple[str, ...], int]:
    impact = revert_preview(scale, scale.ids[0])
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


def test_a_revert_reads_no_more_checkpoints_for_1000_groups_than_for_100(
    tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan with a checkpoint group at every Execute decision (pruned by the budget, their
    rows kept) holds a row per decision: the preview and the execute read each resource's
    first and the restore point's group, not every row — they made a checkpoint of each
    (at 10,000 decisions a cold preview took 0.6 s and an execute 3 s, against 6 ms and
    0.14 s now). The revert must still restore the decision's own group."""
    built: list[str] = []
    original = mapping.checkpoint_from_row

    def counted(row: Any) -> CheckpointMetadata:
        built.append(row.checkpoint_id)
        return original(row)

    monkeypatch.setattr(mapping, "checkpoint_from_row", counted)
    made = {}
    for size in (100, 1_000):
        scale = build(tmp_path / str(size), size, db_url)
        try:
            with scale.store.unit_of_work() as uow:  # the run's last group: it is restored
                groups = [c for c in uow.checkpoints.for_plan(scale.plan_id) if c.decision_id]
                target = groups[-1].decision_id
                assert target is not None
                own = uow.checkpoints.for_decision(target)
            add_pruned_groups(scale, keep={target})
            built.clear()
            impact = revert_preview(scale, target)
            result = execute(
                scale.store, impact, acknowledged=True, requested_by="test", options=scale.options
            )
            made[size] = len(built)
            assert result.correction.status is CorrectionStatus.SUCCEEDED
            assert result.report is not None
            restored = {r.resource_id: r.target_ref for r in result.report.resources}
            assert {c.resource_id: c.ref for c in own if c.rollbackable}.items() <= restored.items()
            assert own  # its own group, not the plan's baseline
        finally:
            scale.store.close()
    assert made[100] == made[1_000], made


def test_a_reverts_diff_names_the_superseded_decisions_as_a_later_read_of_them_does(
    tmp_path: Path, db_url: str
) -> None:
    """The diff in execute's process takes the ids the supersede marked instead of reading
    them again (issue 22): the report must name the same decisions, in the same (sequence)
    order, as the read a diff in another process makes — byte for byte the same report."""
    scale = build(tmp_path, 100, db_url)
    try:
        result, affected, _ = _counted_revert(scale)
        assert result.correction.status is CorrectionStatus.SUCCEEDED
        kept = snapshots_of(result.correction)
        with scale.store.unit_of_work() as uow:
            read = uow.run(superseded_by_any, scale.plan_id, kept["replacements"])
        assert kept["superseded"] == read
        assert set(read) == set(affected)
        assert read != sorted(read)  # sequence order, which the ids' order is not
    finally:
        scale.store.close()
