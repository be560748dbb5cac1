"""The ``transaction_rollback`` strategy as resources name it: which database sandbox to make.

A SQLite target gets a copy of its file (``sqlite_copy.py``), a PostgreSQL target copies of
its database on its server (``postgres_copy/``): exact in every process, with no statement
replay. When the server cannot copy a PostgreSQL database (others are connected to it, or
the login may not create databases or does not own it) the sandbox is one transaction with
savepoints (``transaction/``), which a later process rebuilds by replaying its
statement log; the reason is logged. Sandboxes made by the savepoint strategy (older
versions, or that fallback) keep opening as one.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox import postgres_copy
from cleveragents_tui.sandbox.postgres_copy import (
    CopyUnavailableError,
    PostgresCopySandbox,
    PostgresCopyStrategy,
)
from cleveragents_tui.sandbox.sqlite_copy import (
    SqliteCopySandbox,
    SqliteCopyStrategy,
    is_copy_sandbox,
)
from cleveragents_tui.sandbox.transaction import (
    TransactionRollbackSandbox,
    TransactionRollbackStrategy,
)
from cleveragents_tui.sandbox.transaction.connection import target_url

log = logging.getLogger(__name__)

DatabaseSandbox = SqliteCopySandbox | PostgresCopySandbox | TransactionRollbackSandbox


class DatabaseStrategy:
    """Picks the sandbox of a database resource by its dialect (and, on open, by its files)."""

    name: SandboxStrategyName = SandboxStrategyName.TRANSACTION_ROLLBACK

    def create(self, resource: Resource, plan_id: str, root: Path) -> DatabaseSandbox:
        if target_url(resource).get_backend_name() == "sqlite":
            return SqliteCopyStrategy().create(resource, plan_id, root)
        try:
            return PostgresCopyStrategy().create(resource, plan_id, root)
        except CopyUnavailableError as exc:
            log.warning(
                "%s; its sandbox is a transaction with savepoints instead, which a later "
                "process must replay (a default such as now() then makes it lost): %s",
                exc.problem,
                exc.fix,
            )
        return TransactionRollbackStrategy().create(resource, plan_id, root)

    def open(self, resource: Resource, plan_id: str, root: Path) -> DatabaseSandbox:
        if is_copy_sandbox(root):
            return SqliteCopyStrategy().open(resource, plan_id, root)
        if postgres_copy.is_copy_sandbox(root):
            return PostgresCopyStrategy().open(resource, plan_id, root)
        return TransactionRollbackStrategy().open(resource, plan_id, root)


def is_savepoint_sandbox(root: Path) -> bool:
    """Whether the database sandbox in ``root`` is one transaction with savepoints: another
    process opening it replays its statement log and takes the sandbox over."""
    return not (is_copy_sandbox(root) or postgres_copy.is_copy_sandbox(root))
