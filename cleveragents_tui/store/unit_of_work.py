"""The unit of work: one session, one transaction, the repositories bound to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from cleveragents_tui import failpoints
from cleveragents_tui.store.action_repository import ActionRepository
from cleveragents_tui.store.app_queries import AppQueries
from cleveragents_tui.store.apply_journal import ApplyJournalRepository
from cleveragents_tui.store.database import SQLITE_BEGIN
from cleveragents_tui.store.invariant_queries import InvariantQueries
from cleveragents_tui.store.profile_repository import AutomationProfileRepository
from cleveragents_tui.store.repositories import (
    ApprovalRepository,
    CheckpointRepository,
    ContextBlobRepository,
    CorrectionRepository,
    DecisionRepository,
    EventRepository,
    PlanActionRepository,
    PlanRepository,
    ResourceRepository,
    SettingRepository,
    ToolInvocationRepository,
)
from cleveragents_tui.store.usage_queries import UsageQueries

P = ParamSpec("P")
R = TypeVar("R")


class UnitOfWork:
    """Use as a context manager; nothing is written unless :meth:`commit` is called.

    ``write=True`` takes SQLite's write lock when the transaction begins, so concurrent
    writers wait (busy timeout) instead of failing halfway. The session is private: code
    outside ``store/`` reads and writes through the repositories and query objects bound
    here, or runs one of the store's query functions with :meth:`run`.
    """

    def __init__(self, engine: Engine, write: bool = False) -> None:
        self._engine = engine
        self._write = write

    def __enter__(self) -> UnitOfWork:
        self._session = Session(self._engine, expire_on_commit=False, autoflush=False)
        dialect = self._engine.dialect.name
        if self._write and dialect == "sqlite":
            self._session.connection(execution_options={SQLITE_BEGIN: "IMMEDIATE"})
        self.plans = PlanRepository(self._session)
        self.decisions = DecisionRepository(self._session)
        self.resources = ResourceRepository(self._session)
        self.checkpoints = CheckpointRepository(self._session)
        self.tool_invocations = ToolInvocationRepository(self._session)
        self.corrections = CorrectionRepository(self._session)
        self.approvals = ApprovalRepository(self._session)
        self.events = EventRepository(self._session)
        self.settings = SettingRepository(self._session)
        self.plan_actions = PlanActionRepository(self._session)
        self.contexts = ContextBlobRepository(self._session)
        self.automation_profiles = AutomationProfileRepository(self._session)
        self.apply_journal = ApplyJournalRepository(self._session)
        self.actions = ActionRepository(self._session)
        self.app = AppQueries(self._session)
        self.invariants = InvariantQueries(self._session)
        self.usage = UsageQueries(self._session)
        return self

    def run(
        self, query: Callable[Concatenate[Session, P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Call a query function of ``store/`` (``f(session, ...)``) in this transaction."""
        return query(self._session, *args, **kwargs)

    def flush(self) -> None:
        self._session.flush()

    def commit(self) -> None:
        failpoints.hit("store.commit")
        self._session.commit()

    def __exit__(self, *exc_info: object) -> None:
        self._session.rollback()
        self._session.close()
