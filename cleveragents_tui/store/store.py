"""The store: a database opened, its schema checked, units of work handed out."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from cleveragents_tui.domain.errors import DatabaseUnavailableError
from cleveragents_tui.store.database import (
    in_memory,
    in_memory_refusal,
    make_engine,
    normalise_url,
)
from cleveragents_tui.store.schema import ensure_schema

if TYPE_CHECKING:
    from cleveragents_tui.store.reading import HeldReading, Reading
    from cleveragents_tui.store.recording import HeldConnections, Recording
    from cleveragents_tui.store.unit_of_work import UnitOfWork


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._held: HeldConnections | None = None  # record_decision's (store/recording.py)
        self._reading: HeldReading | None = None  # PostgreSQL previews' (store/reading.py)

    @classmethod
    def open(cls, url: str | None = None, *, migrate: bool = True) -> Store:
        """Open the database at ``url`` (default: the embedded SQLite file).

        An empty database is migrated to the current schema; ``migrate=False`` skips the
        check (for ``agents db upgrade`` itself).
        """
        parsed = normalise_url(url)
        if parsed.get_backend_name() == "sqlite" and in_memory(parsed):
            raise in_memory_refusal(url or "")
        engine = make_engine(parsed)
        if migrate:
            try:
                ensure_schema(engine)
            except DBAPIError as exc:
                engine.dispose()
                first_line = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
                raise DatabaseUnavailableError(
                    f"cannot open {parsed.render_as_string()}: {first_line}",
                    "check the --db URL (or AGENTS_DATABASE_URL) and that the server is running",
                ) from exc
        return cls(engine)

    def unit_of_work(self, write: bool = False) -> UnitOfWork:
        # Imported here: the ORM mapping costs ~0.3 s, and `agents serve` only checks the
        # database before it listens (its tabs' processes work in it).
        from cleveragents_tui.store.unit_of_work import UnitOfWork

        return UnitOfWork(self.engine, write=write)

    def reading(self) -> Reading:
        """A read of one snapshot without the ORM's session (store/reading.py): a
        correction's preview."""
        from cleveragents_tui.store.reading import HeldReading, Reading

        if self._reading is None and self.engine.dialect.name == "postgresql":
            self._reading = HeldReading(self.engine)
        return Reading(self.engine, self._reading)

    def recording(self, write: bool = False) -> Recording:
        """A transaction of record_decision's statements (store/recording.py): a plain
        connection, lighter than a unit of work's session, for the per-decision path."""
        from cleveragents_tui.store.recording import Recording

        return Recording(self.engine, write=write)

    def recordings(self) -> AbstractContextManager[Callable[[bool], Recording]]:
        """Several such transactions on one connection (store/recording.py ``recordings``)."""
        from cleveragents_tui.store.recording import HeldConnections, recordings

        if self._held is None:
            self._held = HeldConnections(self.engine)
        return recordings(self._held)

    def close(self) -> None:
        if self._held is not None:
            self._held.close()
        if self._reading is not None:
            self._reading.close()
        self.engine.dispose()
