"""`local/query-sql`: a database resource read with one statement on a read-only connection
to its sandbox, so Strategize can run it. What it shows is the sandbox's rows (the plan's own
writes included), compared with run-sql's rendering of the same SELECT; every write it is
given fails in the database itself and changes nothing, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

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
from tests.actors.conftest import DB, FILES, GIT, PG, ToolWorld, postgres_world, savepoint_world

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


@pytest.mark.parametrize("tool", ["local/query-sql", "local/run-sql"])
def test_two_statements_in_one_sql_say_how_to_send_them(tool_world: ToolWorld, tool: str) -> None:
    """SQLite runs one statement a call; the model is told how to send several."""
    outcome = tool_world.call(tool, {"resource": DB, "sql": "SELECT 1; SELECT 2"})
    assert not outcome.ok
    assert outcome.output == (
        f"{tool}: SQL failed in the sandbox of local/db: You can only execute one statement at a "
        "time: put one statement in sql: local/run-sql takes several as a statements list "
        '([{"sql": ...}, ...]), local/query-sql one per call'
    )


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


PG_WRITES = [
    "INSERT INTO notes (body) VALUES ('c')",
    "UPDATE notes SET body = 'x'",
    "DELETE FROM notes",
    "CREATE TABLE more (id int)",
    "SELECT nextval('notes_id_seq')",
    "SET TRANSACTION READ WRITE; DELETE FROM notes",
    # a second statement turned the read-only mode off, so the DELETE ran (and was kept)
    "RESET transaction_read_only; DELETE FROM notes",
    "SELECT 1; COMMIT",  # in the savepoint sandbox: the plan's transaction, committed
]


@pytest.mark.postgres
@pytest.mark.parametrize("savepoints", [False, True], ids=["copy", "savepoint-fallback"])
def test_on_postgresql_it_reads_and_every_write_fails(
    tmp_path: Path, sqlite_store: Store, postgres_url: str, savepoints: bool
) -> None:
    """On a copy of the database, and on the one open transaction a server that cannot copy
    gets (a login without CREATEDB): the model reads the plan's own rows; every write, and
    every second statement, is refused and changes nothing in the sandbox or the database."""
    setup = (
        "CREATE TABLE notes (id serial PRIMARY KEY, body text)",
        "INSERT INTO notes (body) VALUES ('a'), ('b')",
    )
    world = savepoint_world if savepoints else postgres_world
    sandboxes, plan = world(sqlite_store, tmp_path, postgres_url, Phase.EXECUTE, *setup)
    executing = ToolContext(plan.plan_id, Phase.EXECUTE, sandboxes)
    context = ToolContext(plan.plan_id, Phase.STRATEGIZE, sandboxes)
    query = default_registry().tool("local/query-sql")
    run_sql = default_registry().tool("local/run-sql")
    everything = {"resource": PG, "sql": "SELECT id, body FROM notes ORDER BY id"}
    try:
        own = run_sql.run(
            executing, {"resource": PG, "sql": "UPDATE notes SET body = 'B' WHERE id = 2"}
        )
        assert own.ok, own.output
        written = sandboxes.modified()
        read = query.run(context, everything)
        assert read.ok and read.writes == (), read.output
        assert read.output == '["id", "body"]\n[1, "a"]\n[2, "B"]\n[2 row(s)]'  # its own write
        for sql in PG_WRITES:
            refused = query.run(context, {"resource": PG, "sql": sql})
            assert not refused.ok, sql
            assert refused.output.endswith("change rows with local/run-sql (in Execute)"), (
                refused.output
            )
        assert sandboxes.modified() == written  # no read noted a write
        assert run_sql.run(executing, everything).output == read.output  # nothing changed
        nextval = run_sql.run(executing, {"resource": PG, "sql": "SELECT nextval('notes_id_seq')"})
        assert nextval.output.splitlines()[1] == "[3]"  # no read took a number
    finally:
        sandboxes.get(PG).discard()
    with create_engine(postgres_url, poolclass=NullPool).connect() as connection:
        real = connection.execute(text("SELECT id, body FROM notes ORDER BY id")).all()
    assert [tuple(r) for r in real] == [(1, "a"), (2, "b")]  # nothing reached the database


def test_a_savepoint_sandbox_has_no_read_only_connection_and_says_what_to_use(
    tool_world: ToolWorld,
) -> None:
    """A SQLite sandbox of one open transaction, as older versions made it: the call is
    refused and names run-sql, and the transaction is left as it was."""
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
            "local/query-sql: the sandbox of local/db is one open SQLite transaction, which has "
            "no read-only connection: read it with local/run-sql (in Execute)"
        )
    finally:
        sandboxes.get(DB).discard()
