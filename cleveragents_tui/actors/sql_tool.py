"""``local/run-sql``: SQL statements inside a database resource's sandbox; ``local/query-sql``:
one statement on a read-only connection to it, which Strategize runs (it only reads).

Each statement runs through the sandbox's own ``execute``: in the copy of a SQLite file
(``sandbox/sqlite_copy.py``) or of a PostgreSQL database (``sandbox/postgres_copy/``), or
inside the PostgreSQL transaction that a savepoint sandbox checkpoints; it refuses transaction control (BEGIN, COMMIT, SAVEPOINT,
...). Parameters bind by name (``:name``); values are never pasted into the SQL. ``blobs``
are parameters given as base64 and bound as bytes (a BLOB, a ``bytea``).
The sandbox also confines the SQL to its own database (``sandbox/sql_confinement.py``):
no ATTACH, ``VACUUM INTO`` or file pragmas on SQLite, no COPY, server files or role changes
on PostgreSQL; a refusal is one line like any failed statement.

Several statements go as a ``statements`` list, never as one script split here: splitting
SQL text safely needs the dialect's own parser (quotes, comments, trigger bodies). They run
in order and stop at the first that fails; those before it ran and stay, as separate calls
would have (a correction rolls them back).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.tool_support import (
    Arguments,
    BadArguments,
    BuiltinTool,
    Param,
    ParamType,
    changed,
    check_arguments,
    open_sandbox,
    refused,
    strategy_of,
    truncate_text,
)
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec

MAX_ROWS: Final = 100
MAX_STATEMENTS: Final = 100

_SQL = Param("sql", ParamType.TEXT, "one SQL statement; bind values as :name")
_PARAMS = Param("params", ParamType.MAPPING, "values for the :name parameters", required=False)
_BLOBS = Param(
    "blobs",
    ParamType.MAPPING,
    "values for :name parameters given as base64, bound as bytes (BLOB, bytea)",
    required=False,
)
STATEMENT_PARAMS: Final = (_SQL, _PARAMS, _BLOBS)


class _Refused(Exception):
    """A call refused before any statement ran (one line)."""


@dataclass(frozen=True)
class Statement:
    """One statement to run and its bound values (blobs decoded to bytes)."""

    sql: str
    values: dict[str, Any]


def _values(params: Mapping[str, Any] | None, blobs: Mapping[str, Any] | None) -> dict[str, Any]:
    values = dict(params or {})
    for key, encoded in (blobs or {}).items():
        if key in values:
            raise _Refused(f"parameter {key!r} is given in both params and blobs")
        if not isinstance(encoded, str):
            raise _Refused(f"blobs[{key!r}] must be a base64 string")
        try:
            values[key] = base64.b64decode("".join(encoded.split()), validate=True)
        except (binascii.Error, ValueError):
            raise _Refused(
                f"blobs[{key!r}] is not valid base64 (RFC 4648 alphabet, with its = padding)"
            ) from None
    return values


def statements_of(arguments: Arguments) -> list[Statement]:
    """The statements of a call: ``sql`` (with ``params``/``blobs``) or ``statements``."""
    listed = arguments.objects("statements")
    single = arguments.optional_text("sql")
    if (listed is None) == (single is None):
        raise _Refused("give either sql (one statement) or statements (a list of them)")
    if listed is None:
        assert single is not None
        return [Statement(single, _values(arguments.mapping("params"), arguments.mapping("blobs")))]
    if arguments.mapping("params") is not None or arguments.mapping("blobs") is not None:
        raise _Refused("with statements, give params and blobs inside each statement")
    if len(listed) > MAX_STATEMENTS:
        raise _Refused(f"{len(listed)} statements in one call; at most {MAX_STATEMENTS}")
    found = []
    for position, item in enumerate(listed):
        try:
            checked = check_arguments(item, STATEMENT_PARAMS)
            found.append(
                Statement(
                    checked.text("sql"),
                    _values(checked.mapping("params"), checked.mapping("blobs")),
                )
            )
        except (BadArguments, _Refused) as exc:
            raise _Refused(f"statements[{position}]: {exc}") from None
    return found


class RunSql(BuiltinTool):
    spec = ToolSpec(
        name="local/run-sql",
        category=ToolCategory.DATABASE,
        description="Run SQL statements (one, or a list in order) in a database resource's "
        "sandbox; BLOB values as base64.",
        writes=True,
        side_effects=("writes:database",),
    )
    params = (
        Param("resource", ParamType.TEXT, "the database resource id (namespace/name)"),
        Param("sql", ParamType.TEXT, "one SQL statement; bind values as :name", required=False),
        _PARAMS,
        _BLOBS,
        Param(
            "statements",
            ParamType.OBJECTS,
            f"instead of sql: up to {MAX_STATEMENTS} statements run in order, each "
            "{sql, params?, blobs?}; the first that fails stops the rest",
            required=False,
        ),
    )

    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        from cleveragents_tui.sandbox.database import DatabaseSandbox

        name, resource_id = self.spec.name, arguments.text("resource")
        try:
            statements = statements_of(arguments)
        except _Refused as exc:
            return refused(f"{name}: {exc}")
        sandbox = open_sandbox(context, resource_id)
        if not isinstance(sandbox, DatabaseSandbox):
            return refused(
                f"{name}: resource {resource_id} uses strategy {strategy_of(sandbox)}; SQL runs "
                "only on database resources with strategy transaction_rollback"
            )
        total, outputs = len(statements), []
        writes: tuple[str, ...] = ()
        for number, statement in enumerate(statements, start=1):
            # A failed statement raises SqlStatementError (a UserError); in a copy (SQLite,
            # PostgreSQL) it changed nothing, in a PostgreSQL savepoint sandbox the
            # transaction waits for a rollback to a checkpoint.
            try:
                result = sandbox.execute(statement.sql, statement.values)
            except UserError as exc:
                if total == 1:
                    raise
                ran = "none ran" if number == 1 else f"statements 1-{number - 1} ran and stay"
                return ToolOutcome(
                    ok=False,
                    output=" ".join(
                        f"{name}: statement {number} of {total} failed, the rest did not run "
                        f"({ran}): {exc}".split()
                    ),
                    writes=writes,
                )
            writes = changed(context, resource_id)  # even a SELECT may call a changing function
            outputs.append(_render(result))
        if total == 1:
            return ToolOutcome(ok=True, output=outputs[0], writes=writes)
        joined = "\n".join(f"[statement {n}]\n{out}" for n, out in enumerate(outputs, 1))
        data = joined.encode("utf-8")
        return ToolOutcome(ok=True, output=truncate_text(data, len(data))[0], writes=writes)


# How SQLite and PostgreSQL refuse a write on a read-only connection or transaction.
_READ_ONLY_SAID: Final = ("readonly database", "read-only transaction", "read-write mode")
_READS_ONLY: Final = "local/query-sql only reads; change rows with local/run-sql (in Execute)"


class QuerySql(BuiltinTool):
    spec = ToolSpec(
        name="local/query-sql",
        category=ToolCategory.READ,
        description="Read a database resource's sandbox with one SQL statement (a SELECT, the "
        f"schema) on a read-only connection: any write fails; at most {MAX_ROWS} rows shown.",
        # what it read is what the actor decided on next: a revert that rolls the database
        # back reads it again, as a read of a file is made again
        side_effects=("reads:database",),
    )
    params = (
        Param("resource", ParamType.TEXT, "the database resource id (namespace/name)"),
        *STATEMENT_PARAMS,
    )

    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        from cleveragents_tui.sandbox.copy_sandbox import CopySandbox
        from cleveragents_tui.sandbox.transaction import TransactionRollbackSandbox

        name, resource_id = self.spec.name, arguments.text("resource")
        try:
            values = _values(arguments.mapping("params"), arguments.mapping("blobs"))
        except _Refused as exc:
            return refused(f"{name}: {exc}")
        sandbox = open_sandbox(context, resource_id)
        if not isinstance(sandbox, CopySandbox | TransactionRollbackSandbox):
            return refused(
                f"{name}: resource {resource_id} uses strategy {strategy_of(sandbox)}; SQL runs "
                "only on database resources with strategy transaction_rollback"
            )
        try:
            result = sandbox.query(arguments.text("sql"), values, MAX_ROWS + 1)
        except UserError as exc:
            if any(said in exc.problem for said in _READ_ONLY_SAID):  # a write, as the model
                # may try: say where writes go
                return refused(f"{name}: {exc.problem}: {_READS_ONLY}")
            raise
        return ToolOutcome(ok=True, output=_render(result))


def _render(result: Any) -> str:
    """What one statement gives back: its rows, or how many rows it changed."""
    try:
        if result.returns_rows:
            return _render_rows(list(result.keys()), result.fetchmany(MAX_ROWS + 1))
        count = result.rowcount
        return f"{count} row(s) affected" if count >= 0 else "statement ran"
    finally:
        result.close()


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
