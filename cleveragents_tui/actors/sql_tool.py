"""``local/run-sql``: one SQL statement inside a ``transaction_rollback`` sandbox.

The statement runs through the sandbox's own ``execute``: in the copy of a SQLite file
(``sandbox/sqlite_copy.py``), or inside the PostgreSQL transaction that the sandbox
checkpoints with savepoints; it refuses transaction control (BEGIN, COMMIT, SAVEPOINT,
...). Parameters bind by name (``:name``); values are never pasted into the SQL.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.tool_support import (
    Arguments,
    BuiltinTool,
    Param,
    ParamType,
    changed,
    open_sandbox,
    refused,
    strategy_of,
    truncate_text,
)
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec

MAX_ROWS: Final = 100


class RunSql(BuiltinTool):
    spec = ToolSpec(
        name="local/run-sql",
        category=ToolCategory.DATABASE,
        description="Run one SQL statement in a database resource's sandbox transaction.",
        writes=True,
        side_effects=("writes:database",),
    )
    params = (
        Param("resource", ParamType.TEXT, "the database resource id (namespace/name)"),
        Param("sql", ParamType.TEXT, "one SQL statement; bind values as :name"),
        Param("params", ParamType.MAPPING, "values for the :name parameters", required=False),
    )

    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        from cleveragents_tui.sandbox.sqlite_copy import SqliteCopySandbox
        from cleveragents_tui.sandbox.transaction_rollback import TransactionRollbackSandbox

        name, resource_id = self.spec.name, arguments.text("resource")
        sandbox = open_sandbox(context, resource_id)
        if not isinstance(sandbox, TransactionRollbackSandbox | SqliteCopySandbox):
            return refused(
                f"{name}: resource {resource_id} uses strategy {strategy_of(sandbox)}; SQL runs "
                "only on database resources with strategy transaction_rollback"
            )
        # A failed statement raises SqlStatementError (a UserError: ok=False); on SQLite it
        # changed nothing, on PostgreSQL the transaction waits for a rollback to a checkpoint.
        result = sandbox.execute(arguments.text("sql"), arguments.mapping("params") or {})
        writes = changed(context, resource_id)  # even a SELECT may call a changing function
        try:
            if result.returns_rows:
                columns = list(result.keys())
                rows = result.fetchmany(MAX_ROWS + 1)
                output = _render_rows(columns, rows)
            else:
                count = result.rowcount
                output = f"{count} row(s) affected" if count >= 0 else "statement ran"
        finally:
            result.close()
        return ToolOutcome(ok=True, output=output, writes=writes)


def _render_rows(columns: list[str], rows: Sequence[Sequence[Any]]) -> str:
    shown = rows[:MAX_ROWS]
    lines = [json.dumps(columns, ensure_ascii=False)]
    lines.extend(json.dumps(list(row), default=_cell, ensure_ascii=False) for row in shown)
    if len(rows) > MAX_ROWS:
        lines.append(f"[first {MAX_ROWS} rows shown; more rows not shown]")
    else:
        lines.append(f"[{len(shown)} row(s)]")
    data = "\n".join(lines).encode("utf-8")
    text, _ = truncate_text(data, len(data))
    return text


def _cell(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    return str(value)
