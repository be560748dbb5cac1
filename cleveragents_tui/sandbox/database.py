"""The ``transaction_rollback`` strategy as resources name it: which database sandbox to make.

A SQLite target gets a copy of its file (``sqlite_copy.py``): exact in every process, with no
statement replay. A PostgreSQL target keeps one transaction with savepoints
(``transaction_rollback.py``), which a later process rebuilds by replaying its statement log.
A SQLite sandbox made by the savepoint strategy before copies existed keeps opening as one.
"""

from __future__ import annotations

from pathlib import Path

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.sqlite_copy import (
    SqliteCopySandbox,
    SqliteCopyStrategy,
    is_copy_sandbox,
)
from cleveragents_tui.sandbox.transaction_rollback import (
    TransactionRollbackSandbox,
    TransactionRollbackStrategy,
    _target_url,
)

DatabaseSandbox = SqliteCopySandbox | TransactionRollbackSandbox


class DatabaseStrategy:
    """Picks the sandbox of a database resource by its dialect (and, on open, by its files)."""

    name: SandboxStrategyName = SandboxStrategyName.TRANSACTION_ROLLBACK

    def create(self, resource: Resource, plan_id: str, root: Path) -> DatabaseSandbox:
        if _target_url(resource).get_backend_name() == "sqlite":
            return SqliteCopyStrategy().create(resource, plan_id, root)
        return TransactionRollbackStrategy().create(resource, plan_id, root)

    def open(self, resource: Resource, plan_id: str, root: Path) -> DatabaseSandbox:
        if is_copy_sandbox(root):
            return SqliteCopyStrategy().open(resource, plan_id, root)
        return TransactionRollbackStrategy().open(resource, plan_id, root)
