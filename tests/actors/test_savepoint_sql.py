"""`local/run-sql` in the sandbox a PostgreSQL server that cannot copy gets: one open
transaction with savepoints (sandbox/transaction/). PostgreSQL runs a string of statements
as one, so `UPDATE …; COMMIT` committed the plan's rows to the real database before Apply
(and lost the sandbox); a statement that ends the transaction is refused before anything
runs, wherever it stands, and statements that do not still run."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from cleveragents_tui.actors.base import ToolContext
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.store.store import Store
from tests.actors.conftest import PG, savepoint_world

pytestmark = pytest.mark.postgres

ENDING = [
    "UPDATE notes SET body = 'x'; COMMIT",
    "UPDATE notes SET body = 'x'; commit;",
    "UPDATE notes SET body = 'x';\n/* done */ END",
    "UPDATE notes SET body = 'x'; ROLLBACK",
    "UPDATE notes SET body = 'x'; COMMIT AND CHAIN",
]


def _real(url: str) -> list[tuple[object, ...]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return [
                tuple(r) for r in connection.execute(text("SELECT body FROM notes ORDER BY id"))
            ]
    finally:
        engine.dispose()


def test_a_statement_that_ends_the_transaction_is_refused_before_anything_runs(
    tmp_path: Path, sqlite_store: Store, postgres_url: str
) -> None:
    setup = (
        "CREATE TABLE notes (id serial PRIMARY KEY, body text)",
        "INSERT INTO notes (body) VALUES ('a')",
    )
    sandboxes, plan = savepoint_world(sqlite_store, tmp_path, postgres_url, Phase.EXECUTE, *setup)
    context = ToolContext(plan.plan_id, Phase.EXECUTE, sandboxes)
    run_sql = default_registry().tool("local/run-sql")
    try:
        for sql in ENDING:
            refused = run_sql.run(context, {"resource": PG, "sql": sql})
            assert not refused.ok, sql
            assert "ends the sandbox's transaction, which would commit the plan's changes" in (
                refused.output
            ), refused.output
            assert _real(postgres_url) == [("a",)]  # the real database: as it was
        # statements that keep the transaction still run, and a COMMIT in a string is text
        both = "UPDATE notes SET body = 'b'; UPDATE notes SET body = body || '; COMMIT'"
        assert run_sql.run(context, {"resource": PG, "sql": both}).ok
        read = run_sql.run(context, {"resource": PG, "sql": "SELECT body FROM notes"})
        assert read.output.splitlines()[1] == '["b; COMMIT"]'  # the sandbox goes on
        assert _real(postgres_url) == [("a",)]
    finally:
        sandboxes.get(PG).discard()
