"""The SQL of the invariant checker (engine/ops/invariants.py): every record it checks, read in
one transaction, and the append-only triggers the ``decisions`` table has."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from cleveragents_tui.domain.checkpoint import CheckpointGroup, CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.errors import StoreCorruptedError
from cleveragents_tui.store import mapping
from cleveragents_tui.store.driver_reads import fetch
from cleveragents_tui.store.tables import (
    CheckpointGroupRow,
    CheckpointMetadataRow,
    ContextBlobRow,
    CorrectionAttemptRow,
    DecisionRow,
    EventRow,
    PlanActionRow,
)

# The triggers the migrations create to keep ``decisions`` append-only, per dialect.
_TRIGGERS = {
    "sqlite": {"decisions_no_delete", "decisions_supersede_only"},
    "postgresql": {"decisions_append_only", "decisions_no_truncate"},
}
_TRIGGER_QUERIES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'decisions'",
    "postgresql": "SELECT tgname FROM pg_trigger "
    "WHERE tgrelid = 'decisions'::regclass AND NOT tgisinternal",
}
_CHUNK = 500  # ids per IN (...) query
# every decision, on the driver's cursor (store/driver_reads.py): through the ORM, making a
# row object of each cost a third of `agents doctor` on a plan of 100,000 decisions
_DECISIONS = select(DecisionRow.__table__).order_by(
    DecisionRow.plan_id, DecisionRow.sequence_number
)


@dataclass(frozen=True)
class InvariantRecords:
    """The rows the checks read, as domain objects (plans and resources come from their
    repositories in the same transaction)."""

    decisions: list[Decision]
    invalid: list[tuple[str, str]]  # (decision id, why): rows that are no valid decision
    groups: list[CheckpointGroup]
    checkpoints: list[CheckpointMetadata]
    corrections: list[CorrectionAttempt]
    run_here: set[str]  # plans with a plan_actions row
    contexts: dict[str, str]  # hot-context hash -> stored body
    applied_at: dict[str, datetime]  # plan -> when it first became applied
    last_event: dict[str, datetime]  # plan -> its newest event but correction_finished


class InvariantQueries:
    def __init__(self, session: Session) -> None:
        self._session = session

    def records(self) -> InvariantRecords:
        """Decisions (in plan and sequence order), groups, checkpoints, corrections, the
        decisions' hot contexts and what the events say about each plan."""
        s = self._session
        decisions: list[Decision] = []
        invalid: list[tuple[str, str]] = []
        for row in fetch(s, _DECISIONS):
            try:
                decisions.append(mapping.decision_from_row(row))
            except StoreCorruptedError as exc:
                invalid.append((row.decision_id, exc.problem))
        groups = [mapping.group_from_row(r) for r in s.scalars(select(CheckpointGroupRow))]
        checkpoints = [
            mapping.checkpoint_from_row(r) for r in s.scalars(select(CheckpointMetadataRow))
        ]
        corrections = [
            mapping.correction_from_row(r)
            for r in s.scalars(
                select(CorrectionAttemptRow).order_by(CorrectionAttemptRow.created_at)
            )
        ]
        run_here = set(s.scalars(select(PlanActionRow.plan_id)))
        hashes = sorted({d.context_snapshot.hot_context_hash or "" for d in decisions} - {""})
        contexts: dict[str, str] = {}
        for start in range(0, len(hashes), _CHUNK):
            query = select(ContextBlobRow.context_hash, ContextBlobRow.body).where(
                ContextBlobRow.context_hash.in_(hashes[start : start + _CHUNK])
            )
            contexts.update({h: b for h, b in s.execute(query)})
        applied_at: dict[str, datetime] = {}
        last_event: dict[str, datetime] = {}
        for event in s.execute(
            select(EventRow.plan_id, EventRow.kind, EventRow.payload, EventRow.created_at)
            .where(EventRow.plan_id.is_not(None))
            .order_by(EventRow.event_id)
        ):
            plan_id, kind, payload, created = str(event[0]), event[1], event[2], event[3]
            if kind != "correction_finished":
                last_event[plan_id] = max(created, last_event.get(plan_id, created))
            if kind == "plan_state" and plan_id not in applied_at:
                state = mapping.load_json("events", plan_id, "payload", payload).get("state")
                if state == PlanState.APPLIED.value:
                    applied_at[plan_id] = created
        return InvariantRecords(
            decisions=decisions,
            invalid=invalid,
            groups=groups,
            checkpoints=checkpoints,
            corrections=corrections,
            run_here=run_here,
            contexts=contexts,
            applied_at=applied_at,
            last_event=last_event,
        )

    def triggers(self) -> tuple[set[str], set[str]]:
        """(the append-only triggers ``decisions`` must have, those it has); both empty on
        a database without such triggers."""
        dialect = self._session.get_bind().dialect.name
        if dialect not in _TRIGGER_QUERIES:
            return set(), set()
        found = self._session.execute(text(_TRIGGER_QUERIES[dialect]))
        return _TRIGGERS[dialect], {str(name) for (name,) in found}
