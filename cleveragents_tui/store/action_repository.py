"""Actions registered with ``agents action create`` in the ``actions`` table.

A row holds the action's name, the file it came from and its whole validated definition
(JSON), so ``agents plan use NAME`` runs exactly what was validated even if the file changed
or went away since.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.errors import NotFoundError, StoreCorruptedError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.tables import ActionRow

_TABLE = "actions"


@dataclass(frozen=True)
class StoredAction:
    name: str
    definition: dict[str, object]
    source: str | None
    created_at: datetime
    updated_at: datetime


def _from_row(row: ActionRow) -> StoredAction:
    definition = mapping.load_json(_TABLE, row.name, "definition", row.definition)
    if not isinstance(definition, dict):
        raise StoreCorruptedError(f"{_TABLE} row {row.name}: definition is not a JSON object")
    return StoredAction(row.name, definition, row.source, row.created_at, row.updated_at)


class ActionRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def put(self, name: str, definition: dict[str, object], source: str | None) -> bool:
        """Store the action, replacing one of that name; True when it was new."""
        row = self._session.get(ActionRow, name)
        now = utc_now()
        if row is None:
            self._session.add(
                ActionRow(
                    name=name,
                    definition=mapping.dump_json(definition),
                    source=source,
                    created_at=now,
                    updated_at=now,
                )
            )
            return True
        row.definition = mapping.dump_json(definition)
        row.source = source
        row.updated_at = now
        return False

    def find(self, name: str) -> StoredAction | None:
        row = self._session.get(ActionRow, name)
        return None if row is None else _from_row(row)

    def get(self, name: str) -> StoredAction:
        found = self.find(name)
        if found is None:
            raise NotFoundError(
                f"action {name} is not registered", "list them with `agents action list`"
            )
        return found

    def all(self) -> list[StoredAction]:
        rows = self._session.scalars(select(ActionRow).order_by(ActionRow.name))
        return [_from_row(r) for r in rows]
