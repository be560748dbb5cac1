"""Tool invocations, settings and the audit log's events."""

from __future__ import annotations

from sqlalchemy import bindparam, insert, or_, select

from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.tool import ToolInvocation
from cleveragents_tui.store import mapping
from cleveragents_tui.store.driver_reads import fetch
from cleveragents_tui.store.repositories.base import Repository
from cleveragents_tui.store.session_writes import write
from cleveragents_tui.store.tables import EventRow, SettingRow, ToolInvocationRow
from cleveragents_tui.store.usage_queries import MODEL_USAGE, kind_is, model_call_cost

_INSERT_EVENT = insert(EventRow)
_SETTING = select(SettingRow.value).where(
    SettingRow.scope == bindparam("scope"), SettingRow.key == bindparam("key")
)


class ToolInvocationRepository(Repository):
    def add(self, invocation: ToolInvocation) -> None:
        self._session.add(mapping.invocation_to_row(invocation))

    def for_decision(self, decision_id: str) -> list[ToolInvocation]:
        return self._list(
            select(ToolInvocationRow)
            .where(ToolInvocationRow.decision_id == decision_id)
            .order_by(ToolInvocationRow.created_at, ToolInvocationRow.invocation_id),
            mapping.invocation_from_row,
        )


class SettingRepository(Repository):
    def get(self, scope: str, key: str) -> object | None:
        """A setting's value, None when unset: read on the driver's cursor (a correction's
        execute asks the plan's model; issue 22), or through the ORM's session while it
        holds changes not written yet (a setting just set or unset in this transaction)."""
        session = self._session
        if session.new or session.dirty or session.deleted:
            row = session.get(SettingRow, (scope, key))
            raw = None if row is None else row.value
        else:
            rows = fetch(session, _SETTING, scope=scope, key=key)
            raw = rows[0].value if rows else None
        return (
            None if raw is None else mapping.load_json("settings", f"{scope}/{key}", "value", raw)
        )

    def set(self, scope: str, key: str, value: object) -> None:
        row = self._session.get(SettingRow, (scope, key))
        if row is None:
            self._session.add(
                SettingRow(
                    scope=scope, key=key, value=mapping.dump_json(value), updated_at=utc_now()
                )
            )
        else:
            row.value = mapping.dump_json(value)
            row.updated_at = utc_now()

    def unset(self, scope: str, key: str) -> bool:
        row = self._session.get(SettingRow, (scope, key))
        if row is None:
            return False
        self._session.delete(row)
        return True

    def all(self) -> list[tuple[str, str, object]]:
        rows = self._session.scalars(select(SettingRow).order_by(SettingRow.scope, SettingRow.key))
        return [
            (r.scope, r.key, mapping.load_json("settings", f"{r.scope}/{r.key}", "value", r.value))
            for r in rows
        ]


class EventRepository(Repository):
    """The audit log: append only."""

    def payloads(self, plan_id: str, kind: str) -> list[dict[str, object]]:
        """The payloads of one plan's events of one kind, oldest first."""
        rows = self._session.scalars(
            select(EventRow.payload)
            .where(EventRow.plan_id == plan_id, kind_is(kind))
            .order_by(EventRow.event_id)
        )
        loaded = [mapping.load_json("events", plan_id, "payload", raw) for raw in rows]
        return [payload for payload in loaded if isinstance(payload, dict)]

    def latest_of(self, plan_id: str, kinds: tuple[str, ...]) -> tuple[str, dict[str, object]]:
        """The kind and payload of the plan's newest event of one of ``kinds``; ("", {})
        when it has none."""
        row = self._session.execute(
            select(EventRow.kind, EventRow.payload)
            .where(EventRow.plan_id == plan_id, or_(*(kind_is(k) for k in kinds)))
            .order_by(EventRow.event_id.desc())
            .limit(1)
        ).first()
        if row is None:
            return "", {}
        payload = mapping.load_json("events", plan_id, "payload", row.payload)
        return row.kind, payload if isinstance(payload, dict) else {}

    def append(
        self,
        kind: str,
        payload: dict[str, object],
        plan_id: str | None = None,
        actor: str | None = None,
    ) -> None:
        # added rows (a new plan the event names) are written first, then the event: a
        # Core insert on the driver's cursor, in the order appended (store/session_writes.py:
        # the ORM's flush of an event at commit cost more than its SQL, issue 22)
        if self._session.new:
            self._session.flush()
        write(
            self._session,
            _INSERT_EVENT,
            {
                "plan_id": plan_id,
                "kind": kind,
                "actor": actor,
                "payload": mapping.dump_json(payload),
                "created_at": utc_now(),
                "cost_usd": model_call_cost(payload) if kind == MODEL_USAGE else None,
            },
        )
