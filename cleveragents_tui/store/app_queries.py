"""The SQL of the interactive app's reads (engine/read/tui_queries.py): a cheap change
fingerprint for live refresh and a plan's recent events; and what a run recorded since a
reader last looked (engine/read/run_progress.py, the CLI's progress lines)."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.store.repositories.decisions import TREE_COLUMNS
from cleveragents_tui.store.tables import (
    ApprovalRow,
    CorrectionAttemptRow,
    DecisionRow,
    EventRow,
    PlanRow,
    ToolInvocationRow,
)


@dataclass(frozen=True)
class EventView:
    event_id: int
    plan_id: str | None
    kind: str
    actor: str | None
    payload: dict[str, object]
    created_at: datetime


@dataclass(frozen=True)
class CallView:
    """A tool call as a progress line shows it: the tool, how it went, its output's start."""

    invocation_id: str
    sequence_number: int  # of the decision that made it
    tool: str
    ok: bool | None
    output: str
    created_at: datetime


CALL_OUTPUT_READ = 400  # characters of a call's output read: its first line is shown


class AppQueries:
    def __init__(self, session: Session) -> None:
        self._session = session

    def fingerprint(self) -> tuple[object, ...]:
        """A tuple that changes whenever a plan, decision, approval, correction or event is
        added or changed: aggregate queries only, cheap enough to poll every 2 s."""
        s = self._session
        plans = s.execute(
            select(
                func.count(),
                func.coalesce(func.sum(PlanRow.version), 0),
                func.max(PlanRow.updated_at),
            )
        ).one()
        decisions = s.execute(select(func.count(), func.count(DecisionRow.superseded_by))).one()
        approvals = s.execute(select(func.count(), func.count(ApprovalRow.answer))).one()
        corrections = s.execute(
            select(func.count(), func.max(CorrectionAttemptRow.finished_at))
        ).one()
        events = s.scalar(select(func.max(EventRow.event_id)))
        return (*plans, *decisions, *approvals, *corrections, events)

    def recent_events(self, plan_id: str | None, limit: int) -> list[EventView]:
        """The newest events (of one plan, or of all), newest first."""
        query = select(EventRow).order_by(EventRow.event_id.desc()).limit(limit)
        if plan_id is not None:
            query = query.where(EventRow.plan_id == plan_id)
        return [_event(r) for r in self._session.scalars(query)]

    def events_since(self, plan_id: str, after_event_id: int) -> list[EventView]:
        """The plan's events after ``after_event_id``, oldest first."""
        rows = self._session.scalars(
            select(EventRow)
            .where(EventRow.plan_id == plan_id, EventRow.event_id > after_event_id)
            .order_by(EventRow.event_id)
        )
        return [_event(r) for r in rows]

    def events_of(self, plan_ids: Collection[str], after_event_id: int) -> list[EventView]:
        """These plans' events after ``after_event_id``, oldest first."""
        rows = self._session.scalars(
            select(EventRow)
            .where(EventRow.plan_id.in_(list(plan_ids)), EventRow.event_id > after_event_id)
            .order_by(EventRow.event_id)
        )
        return [_event(r) for r in rows]

    def recorded_since(self, plan_id: str, after_sequence: int) -> list[tuple[datetime, TreeRow]]:
        """The plan's decisions recorded after sequence number ``after_sequence``, each with
        when it was recorded, in sequence order."""
        rows = self._session.execute(
            select(DecisionRow.created_at, *TREE_COLUMNS)
            .where(DecisionRow.plan_id == plan_id, DecisionRow.sequence_number > after_sequence)
            .order_by(DecisionRow.sequence_number)
        )
        return [(row[0], TreeRow(*row[1:])) for row in rows]

    def calls_since(self, plan_id: str, from_sequence: int) -> list[CallView]:
        """The tool calls of the plan's decisions from sequence number ``from_sequence`` on,
        in the order they were made (bounded by the plan's sequence index: a poll reads the
        calls of the decisions it has not seen end, not the plan's)."""
        call = ToolInvocationRow
        rows = self._session.execute(
            select(
                call.invocation_id,
                DecisionRow.sequence_number,
                call.tool,
                call.ok,
                func.substr(call.output, 1, CALL_OUTPUT_READ),
                call.created_at,
            )
            .join(DecisionRow, DecisionRow.decision_id == call.decision_id)
            .where(DecisionRow.plan_id == plan_id, DecisionRow.sequence_number >= from_sequence)
            .order_by(call.created_at, call.invocation_id)
        )
        return [CallView(r[0], r[1], r[2], r[3], r[4] or "", r[5]) for r in rows]

    def last_event_id(self) -> int:
        return int(self._session.scalar(select(func.max(EventRow.event_id))) or 0)


def _event(row: EventRow) -> EventView:
    try:
        payload = json.loads(row.payload)
    except ValueError:
        payload = {"raw": row.payload}
    return EventView(
        row.event_id,
        row.plan_id,
        row.kind,
        row.actor,
        payload if isinstance(payload, dict) else {"value": payload},
        row.created_at,
    )
