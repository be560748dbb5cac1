"""The SQL of a running plan's usage (engine/run/policing.py checks it against the limits):
tool calls counted, model calls read back, when the plan started running."""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache

from sqlalchemy import ColumnElement, func, literal_column, select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.store import mapping
from cleveragents_tui.store.tables import DecisionRow, EventRow, ToolInvocationRow

MODEL_USAGE = "model_usage"  # the event kind of one model call: tokens and cost
_KIND = re.compile(r"[a-z][a-z0-9_]*")  # the event kinds' names, as the code names them


@cache
def kind_is(kind: str) -> ColumnElement[bool]:
    """``events.kind = 'kind'`` with the kind written as a literal, not a bound value:
    events' partial index (``ix_events_model_cost``, WHERE kind = 'model_usage') makes
    SQLite plan a statement with a bound ``kind = ?`` anew at every execution, to see
    whether that index applies (6.1 µs against 1.9 for a plan's events of one kind;
    issue 22). Kinds are the code's own names; anything else is refused, not quoted."""
    if not _KIND.fullmatch(kind):
        raise ValueError(f"not an event kind: {kind!r}")
    return EventRow.kind == literal_column(f"'{kind}'")


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
                EventRow.plan_id == plan_id, kind_is("plan_state")
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
                kind_is(MODEL_USAGE),
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

    def model_calls(self, plan_id: str) -> list[dict[str, object]]:
        """The plan's recorded model calls, oldest first (what ``show`` adds up)."""
        query = select(EventRow.payload).where(kind_is(MODEL_USAGE), EventRow.plan_id == plan_id)
        calls = []
        for raw in self._session.scalars(query.order_by(EventRow.event_id)):
            payload = mapping.load_json("events", plan_id, "payload", raw)
            if isinstance(payload, dict):
                calls.append(payload)
        return calls

    def total_cost_usd(self) -> float:
        """What every plan's model calls cost (``safety.max_total_cost``): their
        ``cost_usd`` column summed from migration 0013's index, one number back. Before,
        every call of every plan was read and its JSON parsed before each step (issue 22:
        0.1 s at 10,000 calls); summing the JSON in SQL still took 16-75 ms."""
        query = select(func.sum(EventRow.cost_usd)).where(kind_is(MODEL_USAGE))
        return float(self._session.scalar(query) or 0.0)


def model_call_cost(payload: dict[str, object]) -> float | None:
    """A model call's cost as its event's ``cost_usd`` column holds it: None (counted 0) for
    a cost that is not a number, as migration 0013 copies the costs recorded before it."""
    cost = payload.get("cost_usd")
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
