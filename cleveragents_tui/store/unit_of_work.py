"""The unit of work: one session, one transaction, the repositories bound to it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from cleveragents_tui.domain.errors import ConcurrentChangeError, ImmutableRecordError
from cleveragents_tui.store.database import SQLITE_BEGIN
from cleveragents_tui.store.repositories import (
    ApprovalRepository,
    CheckpointRepository,
    CorrectionRepository,
    DecisionRepository,
    EventRepository,
    PlanRepository,
    ResourceRepository,
    ToolInvocationRepository,
)

APPEND_ONLY_MARKER = "decisions are append-only"


@contextmanager
def translate_store_errors() -> Iterator[None]:
    """Turn the database's refusals into the domain's errors."""
    try:
        yield
    except DBAPIError as exc:
        message = str(exc.orig)
        if APPEND_ONLY_MARKER in message:
            raise ImmutableRecordError(
                message.splitlines()[0],
                "corrections add new decisions; they never delete or edit old ones",
            ) from exc
        if "could not obtain lock" in message or "database is locked" in message:
            raise ConcurrentChangeError(
                "another process is changing this plan right now", "wait for it to finish and retry"
            ) from exc
        raise


class UnitOfWork:
    """Use as a context manager; nothing is written unless :meth:`commit` is called.

    ``write=True`` takes SQLite's write lock when the transaction begins, so concurrent
    writers wait (busy timeout) instead of failing halfway.
    """

    def __init__(self, engine: Engine, write: bool = False) -> None:
        self._engine = engine
        self._write = write

    def __enter__(self) -> UnitOfWork:
        self.session = Session(self._engine, expire_on_commit=False, autoflush=False)
        if self._write and self._engine.dialect.name == "sqlite":
            with translate_store_errors():
                self.session.connection(execution_options={SQLITE_BEGIN: "IMMEDIATE"})
        self.plans = PlanRepository(self.session)
        self.decisions = DecisionRepository(self.session)
        self.resources = ResourceRepository(self.session)
        self.checkpoints = CheckpointRepository(self.session)
        self.tool_invocations = ToolInvocationRepository(self.session)
        self.corrections = CorrectionRepository(self.session)
        self.approvals = ApprovalRepository(self.session)
        self.events = EventRepository(self.session)
        return self

    def flush(self) -> None:
        with translate_store_errors():
            self.session.flush()

    def commit(self) -> None:
        with translate_store_errors():
            self.session.commit()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.session.rollback()
        self.session.close()
