"""The unit of work: one session, one transaction, the repositories bound to it."""

from __future__ import annotations

from types import TracebackType

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
            self.session.connection(execution_options={SQLITE_BEGIN: "IMMEDIATE"})
        self.plans = PlanRepository(self.session)
        self.decisions = DecisionRepository(self.session)
        self.resources = ResourceRepository(self.session)
        self.checkpoints = CheckpointRepository(self.session)
        self.tool_invocations = ToolInvocationRepository(self.session)
        self.corrections = CorrectionRepository(self.session)
        self.approvals = ApprovalRepository(self.session)
        self.events = EventRepository(self.session)
        self.settings = SettingRepository(self.session)
        self.plan_actions = PlanActionRepository(self.session)
        self.contexts = ContextBlobRepository(self.session)
        self.automation_profiles = AutomationProfileRepository(self.session)
        self.apply_journal = ApplyJournalRepository(self.session)
        self.actions = ActionRepository(self.session)
        self.app = AppQueries(self.session)
        self.invariants = InvariantQueries(self.session)
        self.usage = UsageQueries(self.session)
        return self

    def flush(self) -> None:
        self.session.flush()

    def commit(self) -> None:
        failpoints.hit("store.commit")
        self.session.commit()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.session.rollback()
        self.session.close()
