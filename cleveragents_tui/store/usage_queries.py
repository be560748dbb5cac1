"""The SQL of a running plan's usage (engine/run/policing.py checks it against the limits):
tool calls counted, model calls read back, when the plan started running."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.store import mapping
from cleveragents_tui.store.tables import DecisionRow, EventRow, ToolInvocationRow

MODEL_USAGE = "model_usage"  # the event kind of one model call: tokens and cost


class UsageQueries:
    def __init__(self, session: Session) -> None:
        self._session = session

    def tool_calls(self, plan_id: str) -> int:
        """Every tool call the plan made, superseded decisions' included: spent is spent."""
        return self._count(ToolInvocationRow.plan_id == plan_id)

    def failed_calls(self, plan_id: str, tool: str) -> int:
        """The plan's calls of ``tool`` that failed: the next call of it is a retry."""
        return self._count(
            ToolInvocationRow.plan_id == plan_id,
            ToolInvocationRow.tool == tool,
            ToolInvocationRow.ok.is_(False),
        )

    def execute_tool_calls(self, plan_id: str) -> int:
        """The tool calls of the plan's current Execute decisions: the execution actor's
        invocation as it stands (a correction's rollback takes its calls out)."""
        query = (
            select(func.count())
            .select_from(ToolInvocationRow)
            .join(DecisionRow, DecisionRow.decision_id == ToolInvocationRow.decision_id)
            .where(
                ToolInvocationRow.plan_id == plan_id,
                DecisionRow.superseded_by.is_(None),
                DecisionRow.phase == Phase.EXECUTE.value,
            )
        )
        return int(self._session.scalar(query) or 0)

    def _count(self, *where: object) -> int:
        query = select(func.count()).select_from(ToolInvocationRow).where(*where)  # type: ignore[arg-type]
        return int(self._session.scalar(query) or 0)

    def started_running(self, plan_id: str) -> datetime | None:
        """When the plan first changed state (Strategize began), None before that."""
        return self._session.scalar(
            select(func.min(EventRow.created_at)).where(
                EventRow.plan_id == plan_id, EventRow.kind == "plan_state"
            )
        )

    def model_calls_after(self, plan_id: str, after: int) -> tuple[list[dict[str, object]], int]:
        """The plan's model calls recorded after event ``after`` (oldest first), and the last
        event id read: a running plan adds up its calls as they come, reading only the new
        ones before each step (events are append-only; one runner records a plan's)."""
        query = (
            select(EventRow.event_id, EventRow.payload)
            .where(
                EventRow.plan_id == plan_id,
                EventRow.kind == MODEL_USAGE,
                EventRow.event_id > after,
            )
            .order_by(EventRow.event_id)
        )
        calls, last = [], after
        for event_id, raw in self._session.execute(query):
            last = event_id
            payload = mapping.load_json("events", plan_id, "payload", raw)
            if isinstance(payload, dict):
                calls.append(payload)
        return calls, last

    def model_calls(self, plan_id: str | None = None) -> list[dict[str, object]]:
        """The recorded model calls of one plan, or of every plan (``max_total_cost``)."""
        query = select(EventRow.plan_id, EventRow.payload).where(EventRow.kind == MODEL_USAGE)
        if plan_id is not None:
            query = query.where(EventRow.plan_id == plan_id)
        calls = []
        for owner, raw in self._session.execute(query.order_by(EventRow.event_id)):
            payload = mapping.load_json("events", owner or "-", "payload", raw)
            if isinstance(payload, dict):
                calls.append(payload)
        return calls
