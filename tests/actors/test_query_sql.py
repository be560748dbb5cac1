"""`local/query-sql`: a database resource read with one statement on a read-only connection
to its sandbox, so Strategize can run it. What it shows is the sandbox's rows (the plan's own
writes included), compared with run-sql's rendering of the same SELECT; every write it is
given fails in the database itself and changes nothing, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.actors.base import ToolContext
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_root
from cleveragents_tui.sandbox.transaction import (
    TransactionRollbackSandbox,
    TransactionRollbackStrategy,
)
from cleveragents_tui.store.store import Store
from tests.actors.conftest import DB, FILES, GIT, PG, ToolWorld, postgres_world

WRITES = [
    "INSERT INTO greetings (text) VALUES ('sneaked in')",
    "UPDATE greetings SET text = 'changed'",
    "DELETE FROM greetings",
    "CREATE TABLE more (id INTEGER)",
    "DROP TABLE greetings",
    "PRAGMA user_version = 7",
]


def _rows(world: ToolWorld) -> str:
    """The sandbox's rows as run-sql (the write tool) shows them."""
    shown = world.call("local/run-sql", {"resource": DB, "sql": "SELECT * FROM greetings"})
    assert shown.ok, shown.output
    return shown.output


def test_it_shows_the_sandbox_rows_as_run_sql_does_and_writes_nothing(
    tool_world: ToolWorld,
) -> None:
    written = tool_world.call(
        "local/run-sql",
        {"resource": DB, "sql": "INSERT INTO greetings (text) VALUES (:t)", "params": {"t": "hi"}},
    )
    assert written.ok, written.output
    outcome = tool_world.call(
        "local/query-sql",
        {"resource": DB, "sql": "SELECT * FROM greetings WHERE id >= :low", "params": {"low": 1}},
    )
    assert outcome.ok, outcome.output
    assert outcome.writes == ()
    assert outcome.output == _rows(tool_world)  # the plan's own row too
    assert '"hi"' in outcome.output


@pytest.mark.parametrize("sql", WRITES)
def test_every_write_fails_in_the_database_and_changes_nothing(
    tool_world: ToolWorld, sql: str
) -> None:
    before = _rows(tool_world)
    outcome = tool_world.call("local/query-sql", {"resource": DB, "sql": sql})
    assert not outcome.ok
    assert outcome.output.startswith("local/query-sql: ")
    assert outcome.output.endswith(
        ": local/query-sql only reads; change rows with local/run-sql (in Execute)"
    )
    assert outcome.writes == ()
    assert _rows(tool_world) == before
    version = tool_world.call("local/run-sql", {"resource": DB, "sql": "PRAGMA user_version"})
    assert version.output.splitlines()[1] == "[0]"


def test_it_reads_the_schema_and_at_most_100_rows(tool_world: ToolWorld) -> None:
    schema = tool_world.call(
        "local/query-sql",
        {"resource": DB, "sql": "SELECT name FROM sqlite_master WHERE type = 'table'"},
    )
    assert schema.ok and '["greetings"]' in schema.output
    many = tool_world.call(
        "local/query-sql",
        {
            "resource": DB,
            "sql": "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)"
            " SELECT i FROM n",
        },
    )
    lines = many.output.splitlines()
    assert lines[0] == '["i"]' and lines[1] == "[1]" and lines[100] == "[100]"
    assert lines[-1] == "[first 100 rows shown; more rows not shown]"


@pytest.mark.parametrize("sql", ["ATTACH DATABASE 'x.db' AS x", "BEGIN", "COMMIT"])
def test_what_reaches_outside_or_controls_the_transaction_is_refused(
    tool_world: ToolWorld, sql: str
) -> None:
    outcome = tool_world.call("local/query-sql", {"resource": DB, "sql": sql})
    assert not outcome.ok and "refused in the sandbox of local/db" in outcome.output


@pytest.mark.parametrize("resource_id", [GIT, FILES])
def test_a_resource_that_is_no_database_is_refused(tool_world: ToolWorld, resource_id: str) -> None:
    outcome = tool_world.call("local/query-sql", {"resource": resource_id, "sql": "SELECT 1"})
    assert not outcome.ok
    assert "SQL runs only on database resources" in outcome.output


def test_it_only_reads_so_strategize_runs_it() -> None:
    spec = default_registry().get("local/query-sql")
    assert spec is not None
    assert spec.reads_only and not spec.writes and spec.side_effects == ("reads:database",)


@pytest.mark.postgres
def test_on_postgresql_it_reads_and_every_write_fails(
    tmp_path: Path, sqlite_store: Store, postgres_url: str
) -> None:
    sandboxes, plan = postgres_world(
        sqlite_store,
        tmp_path,
        postgres_url,
        Phase.STRATEGIZE,
        "CREATE TABLE notes (id serial PRIMARY KEY, body text)",
        "INSERT INTO notes (body) VALUES ('a'), ('b')",
    )
    context = ToolContext(plan.plan_id, Phase.STRATEGIZE, sandboxes)
    query = default_registry().tool("local/query-sql")
    run_sql = default_registry().tool("local/run-sql")
    everything = {"resource": PG, "sql": "SELECT id, body FROM notes ORDER BY id"}
    try:
        read = query.run(context, everything)
        assert read.ok and read.writes == ()
        assert read.output == '["id", "body"]\n[1, "a"]\n[2, "b"]\n[2 row(s)]'
        for sql in (
            "INSERT INTO notes (body) VALUES ('c')",
            "UPDATE notes SET body = 'x'",
            "DELETE FROM notes",
            "CREATE TABLE more (id int)",
            "SELECT nextval('notes_id_seq')",
            "SET TRANSACTION READ WRITE; DELETE FROM notes",
        ):
            refused = query.run(context, {"resource": PG, "sql": sql})
            assert not refused.ok, sql
            assert refused.output.endswith("change rows with local/run-sql (in Execute)"), (
                refused.output
            )
        assert sandboxes.modified() == set()  # no call noted a write
        executing = ToolContext(plan.plan_id, Phase.EXECUTE, sandboxes)
        assert run_sql.run(executing, everything).output == read.output  # nothing changed
    finally:
        sandboxes.get(PG).discard()


def test_a_savepoint_sandbox_has_no_read_only_connection_and_says_what_to_use(
    tool_world: ToolWorld,
) -> None:
    """The PostgreSQL fallback (one open transaction) made here on SQLite, as older versions
    made it: the call is refused and names run-sql, and the transaction is left as it was."""
    store = tool_world.sandboxes.store
    plan = Plan(action="local/tools", phase="strategize", state="running")
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        resource = uow.resources.get(DB)
        uow.commit()
    base = tool_world.tmp / "savepoint-sandboxes"
    made = TransactionRollbackStrategy().create(
        resource, plan.plan_id, sandbox_root(base, plan.plan_id, DB)
    )
    sandboxes = PlanSandboxes(store, plan.plan_id, base)
    try:
        context = ToolContext(plan.plan_id, Phase.STRATEGIZE, sandboxes)
        outcome = (
            default_registry()
            .tool("local/query-sql")
            .run(context, {"resource": DB, "sql": "SELECT * FROM greetings"})
        )
        assert isinstance(sandboxes.get(DB), TransactionRollbackSandbox)
        assert made.execute("SELECT count(*) FROM greetings").scalar() == 1  # still usable
        assert not outcome.ok and outcome.writes == ()
        assert outcome.output == (
            "local/query-sql: the sandbox of local/db is one open transaction, which has no "
            "read-only connection: read it with local/run-sql (in Execute)"
        )
    finally:
        sandboxes.get(DB).discard()
