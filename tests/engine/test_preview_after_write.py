"""A preview after a write shows what the write changed (issue 22).

The preview keeps its plan-level reads, and the decision's model, until the database
changes (store/snapshot_reads.py), on a connection the store holds for previews only
(store/reading.py). A write that changes what a preview shows must be seen by the next
preview, on SQLite and on PostgreSQL, whichever of the store's connections made it; a write
rolled back changes nothing, and on SQLite the kept reads then stay.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert, text

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionRequest, Impact
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.correct.snapshot import load
from cleveragents_tui.store.tables import DecisionRow, ToolInvocationRow
from tests.support.scale_plan import ScalePlan, build

GUIDANCE = "make it loud"


def _preview(scale: ScalePlan, decision_id: str) -> Impact:
    return preview(
        scale.store,
        decision_id,
        CorrectionMode.REVERT,
        GUIDANCE,
        sandbox_base=scale.options.sandbox_base,
    )


def _request(scale: ScalePlan, decision_id: str) -> CorrectionRequest:
    return CorrectionRequest(
        decision_id, CorrectionMode.REVERT, GUIDANCE, sandbox_base=scale.options.sandbox_base
    )


def _record_step(scale: ScalePlan, under: str) -> str:
    """A decision of the action's first step recorded under ``under`` through the store's
    own engine, with a call that cannot be undone; its id."""
    decision_id, now = new_ulid(), datetime.now(UTC)
    with scale.store.engine.begin() as connection:
        connection.execute(
            insert(DecisionRow),
            [
                {
                    "decision_id": decision_id,
                    "plan_id": scale.plan_id,
                    "parent_decision_id": under,
                    "sequence_number": 10_000,
                    "decision_type": "implementation_choice",
                    "phase": "execute",
                    "question": "later",
                    "step_key": "step-0",
                    "chosen_option": "later",
                    "alternatives_considered": "[]",
                    "relevant_resources": "[]",
                    "created_at": now,
                    "is_correction": False,
                }
            ],
        )
        connection.execute(
            insert(ToolInvocationRow),
            [
                {
                    "invocation_id": new_ulid(),
                    "plan_id": scale.plan_id,
                    "decision_id": decision_id,
                    "tool": "local/launch",
                    "arguments": "{}",
                    "side_effects": '["launches"]',
                    "irreversible": True,
                    "created_at": now,
                    "ok": True,
                    "output": "",
                }
            ],
        )
    return decision_id


def test_a_decision_recorded_between_two_previews_is_in_the_second(
    tmp_path: Path, db_url: str
) -> None:
    scale = build(tmp_path, 30, db_url)
    target = scale.ids[0]
    try:
        first = load(scale.store, _request(scale, target))
        assert load(scale.store, _request(scale, target)).resources is first.resources  # kept
        before = _preview(scale, target)
        recorded = _record_step(scale, target)
        steps = load(scale.store, _request(scale, target)).current_steps
        after = _preview(scale, target)
    finally:
        scale.store.close()
    assert first.current_steps["step-0"][0] != recorded
    assert steps["step-0"][0] == recorded  # the plan-level step read again, not kept
    assert recorded not in before.affected_decisions
    assert recorded in after.affected_decisions
    assert "local/launch" in {e.tool for e in after.irreversible}


def test_a_correction_applied_between_two_previews_is_in_the_second(
    tmp_path: Path, db_url: str
) -> None:
    scale = build(tmp_path, 30, db_url)
    try:
        impact = _preview(scale, scale.ids[0])
        result = execute(
            scale.store, impact, acknowledged=True, requested_by="test", options=scale.options
        )
        assert result.correction.status is CorrectionStatus.SUCCEEDED
        with scale.store.unit_of_work() as uow:
            plan = uow.plans.get(scale.plan_id)
            made = [d for d in uow.decisions.for_plan(scale.plan_id) if d.superseded_by is None]
        remade = next(d for d in made if d.step_key == "step-1")  # the replay's
        after = _preview(scale, remade.decision_id)
    finally:
        scale.store.close()
    assert plan.attempt != impact.attempt  # the correction began a new attempt
    assert after.attempt == plan.attempt  # the plan read again, not the kept one


def test_a_write_rolled_back_elsewhere_leaves_the_kept_reads(tmp_path: Path, db_url: str) -> None:
    """A write rolled back changes nothing a preview shows. On PostgreSQL the snapshot moves,
    but the transactions it newly sees were rolled back: the kept reads stay. On SQLite a
    pooled connection's changes count those rolled back: they are read again, equal."""
    scale = build(tmp_path, 30, db_url)
    target = scale.ids[0]
    try:
        first = load(scale.store, _request(scale, target))
        with scale.store.engine.connect() as connection, connection.begin() as transaction:
            connection.execute(
                text("UPDATE decisions SET superseded_by = :by WHERE decision_id = :d"),
                {"d": target, "by": scale.ids[1]},
            )
            transaction.rollback()
        again = load(scale.store, _request(scale, target))
    finally:
        scale.store.close()
    assert again.resources == first.resources and again.plan == first.plan
    assert again.decision.superseded_by is None
    if db_url.startswith("postgresql"):
        assert again.resources is first.resources  # kept
