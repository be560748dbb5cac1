"""The savepoint sandbox (``transaction_rollback`` when the server cannot copy the database).

Modules, lowest first: :mod:`.connection` (the engine and the driver), :mod:`.state` (the
state and lock files), :mod:`.snapshots` (rows keyed for diff and read), :mod:`.core`,
:mod:`.statement_log`, :mod:`.replay` and :mod:`.sandbox` (the sandbox class, one layer each),
:mod:`.strategy`. Design: docs/sandboxes.md, "The savepoint sandbox".
"""

from cleveragents_tui.sandbox.transaction.core import SqlStatementError
from cleveragents_tui.sandbox.transaction.sandbox import TransactionRollbackSandbox
from cleveragents_tui.sandbox.transaction.strategy import TransactionRollbackStrategy

__all__ = ["SqlStatementError", "TransactionRollbackSandbox", "TransactionRollbackStrategy"]
