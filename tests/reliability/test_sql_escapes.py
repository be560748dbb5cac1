"""Hostile SQL: ``local/run-sql`` never reaches outside its resource's database (issue 21, 2).

A corpus of known escapes, and 300 respellings of them, goes through the tool the way an
agent sends it — one statement, a ``statements`` list, a trigger that tries later — and
through the replay of a statement log in a new process (as ``agents doctor`` or a
correction runs it), on SQLite and PostgreSQL. The promise: each is a tool error (``ok``
False, one line), no file outside the sandbox is created or changed, the engine's own
``agents.db`` is never read, and Apply lands exactly what the plan did inside its database.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.sandbox.transaction.statement_log import LOG_FILE_NAME
from cleveragents_tui.store.store import Store
from tests.actors.conftest import DB, ToolWorld, tool_world
from tests.sandbox.test_transaction_replay import run_process, target
from tests.sandbox.test_transaction_rollback import Target

__all__ = ["target", "tool_world"]  # fixtures used here

# {x} and {y}: files outside the sandbox that must never appear; {agents}: the engine's
# own database; {dir}: a folder outside the sandbox.
SQLITE_ESCAPES = [
    "ATTACH DATABASE '{x}' AS x",
    "; ATTACH DATABASE '{x}' AS x",
    "aTtAcH   DaTaBaSe\n'{x}'\tAS x",
    "/* hi */ -- there\n  ATTACH '{x}' AS x",
    ";;\n;attach/**/'{x}'/**/as/**/x",
    "ATTACH 'file:{x}?mode=rwc' AS x",
    "ATTACH DATABASE '{agents}' AS engine",
    "; ATTACH DATABASE '{agents}' AS engine",
    "DETACH DATABASE main",
    "SELECT load_extension('{x}')",
    "select LOAD_EXTENSION('{x}', 'sqlite3_extension_init')",
    "PRAGMA writable_schema=1",
    "PRAGMA main.writable_schema = ON",
    "pragma WRITABLE_SCHEMA = 'yes'",
    "PRAGMA schema_version = 1",
    "PRAGMA journal_mode = WAL",
    "PRAGMA temp_store_directory = '{dir}'",
    "PRAGMA data_store_directory = '{dir}'",
    "PRAGMA mmap_size = 268435456",
    "PRAGMA database_list",
    "SELECT * FROM pragma_database_list",
    "VACUUM INTO '{y}'",
    "; VACUUM main INTO '{y}'",
    "vacuum/**/into/**/'{y}'",
    "VACUUM INTO 'file:{y}?mode=rwc'",
    "SELECT writefile('{x}', 'data')",
    "SELECT readfile('{agents}')",
    "SELECT * FROM sqlite_dbpage",
    "CREATE VIRTUAL TABLE files USING fsdir('{dir}')",
    "CREATE TRIGGER t AFTER INSERT ON greetings BEGIN ATTACH '{x}' AS x; END",
]


def fill(sql: str, world: ToolWorld) -> str:
    return sql.format(
        x=world.tmp / "escape-x.db",
        y=world.tmp / "escape-y.db",
        agents=world.tmp / "agents.db",
        dir=world.tmp / "outside",
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def work_rows(world: ToolWorld) -> list[tuple[object, ...]]:
    result = world.sandboxes.get(DB).execute("SELECT * FROM greetings ORDER BY id")  # type: ignore[attr-defined]
    return [tuple(row) for row in result.all()]


def refused(outcome: ToolOutcome) -> None:
    assert not outcome.ok, outcome.output
    assert "\n" not in outcome.output, outcome.output
    assert outcome.output.startswith("local/run-sql: "), outcome.output


def nothing_escaped(world: ToolWorld, target_before: str, outside_before: dict[str, str]) -> None:
    assert not (world.tmp / "escape-x.db").exists()
    assert not (world.tmp / "escape-y.db").exists()
    assert not (world.tmp / "outside").exists()
    assert digest(world.tmp / "target.db") == target_before
    assert world.outside() == outside_before


@pytest.mark.parametrize("sql", SQLITE_ESCAPES)
def test_each_sqlite_escape_is_a_one_line_tool_error(tool_world: ToolWorld, sql: str) -> None:
    target_before, outside_before = digest(tool_world.tmp / "target.db"), tool_world.outside()
    outcome = tool_world.call("local/run-sql", {"resource": DB, "sql": fill(sql, tool_world)})
    refused(outcome)
    assert outcome.writes == ()
    nothing_escaped(tool_world, target_before, outside_before)
    assert work_rows(tool_world) == [(1, "hello")]
    assert tool_world.sandboxes.modified() == set()


def mutate(sql: str, rng: random.Random) -> str:
    """``sql`` respelled as SQLite still reads it: keyword case, comments and whitespace
    between words, stray semicolons and comments in front (quoted paths kept as they are)."""
    gaps = [" ", "\n", "\t", "/**/", "/* x */", " -- c\n", "  \r\n "]
    parts = sql.split("'")
    for index in range(0, len(parts), 2):  # outside the quoted strings
        words = parts[index].split(" ")
        words = ["".join(c.upper() if rng.random() < 0.5 else c.lower() for c in w) for w in words]
        parts[index] = "".join(w + rng.choice(gaps) for w in words[:-1]) + words[-1]
    prefix = rng.choice(["", ";", " ;; ", "/*a*/", "-- c\n", ";\n/* b */ ;"])
    return prefix + "'".join(parts)


def test_respelled_escapes_never_get_out(tool_world: ToolWorld) -> None:
    """A fuzz corpus: 300 respellings of the escapes, derandomized; none runs."""
    rng = random.Random(21)
    target_before, outside_before = digest(tool_world.tmp / "target.db"), tool_world.outside()
    bases = [fill(sql, tool_world) for sql in SQLITE_ESCAPES]
    for _ in range(300):
        sql = mutate(rng.choice(bases), rng)
        outcome = tool_world.call("local/run-sql", {"resource": DB, "sql": sql})
        assert not outcome.ok, (sql, outcome.output)
        assert "\n" not in outcome.output
    nothing_escaped(tool_world, target_before, outside_before)
    assert work_rows(tool_world) == [(1, "hello")]


def test_the_refusal_names_the_confinement(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-sql", {"resource": DB, "sql": fill("; VACUUM INTO '{y}'", tool_world)}
    )
    refused(outcome)
    assert "refused in the sandbox of local/db: it reaches outside its database" in (outcome.output)
    assert "no ATTACH, VACUUM INTO, load_extension" in outcome.output


def test_an_escape_in_a_statements_list_stops_the_list(tool_world: ToolWorld) -> None:
    target_before, outside_before = digest(tool_world.tmp / "target.db"), tool_world.outside()
    x = tool_world.tmp / "escape-x.db"
    outcome = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "statements": [
                {"sql": "INSERT INTO greetings (text) VALUES ('inside')"},
                {"sql": f" ;ATTACH DATABASE '{x}' AS x"},
                {"sql": "CREATE TABLE x.stolen AS SELECT * FROM main.greetings"},
            ],
        },
    )
    refused(outcome)
    assert "statement 2 of 3 failed, the rest did not run (statements 1-1 ran and stay)" in (
        outcome.output
    )
    nothing_escaped(tool_world, target_before, outside_before)
    assert work_rows(tool_world) == [(1, "hello"), (2, "inside")]


def test_a_trigger_the_agent_made_cannot_reach_out_later(tool_world: ToolWorld) -> None:
    target_before, outside_before = digest(tool_world.tmp / "target.db"), tool_world.outside()
    x = tool_world.tmp / "escape-x.db"
    made = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "sql": "CREATE TRIGGER later AFTER INSERT ON greetings "
            f"BEGIN SELECT load_extension('{x}'); END",
        },
    )
    assert made.ok, made.output  # SQLite checks a trigger's body when it fires
    fired = tool_world.call(
        "local/run-sql",
        {"resource": DB, "sql": "INSERT INTO greetings (text) VALUES ('fires the trigger')"},
    )
    refused(fired)
    nothing_escaped(tool_world, target_before, outside_before)
    assert work_rows(tool_world) == [(1, "hello")]


def test_apply_lands_only_what_the_plan_did_inside_its_database(tool_world: ToolWorld) -> None:
    for sql in SQLITE_ESCAPES:
        refused(tool_world.call("local/run-sql", {"resource": DB, "sql": fill(sql, tool_world)}))
    insert = tool_world.call(
        "local/run-sql", {"resource": DB, "sql": "INSERT INTO greetings (text) VALUES ('kept')"}
    )
    assert insert.ok, insert.output
    result = tool_world.sandboxes.get(DB).apply()
    assert "(1 change in 1 table; 1 row written)" in result.summary
    with sqlite3.connect(tool_world.tmp / "target.db") as connection:
        assert connection.execute("SELECT * FROM greetings ORDER BY id").fetchall() == [
            (1, "hello"),
            (2, "kept"),
        ]
        assert connection.execute("PRAGMA database_list").fetchall()[1:] == []
    assert not (tool_world.tmp / "escape-x.db").exists()
    assert not (tool_world.tmp / "escape-y.db").exists()


# -- a logged escape is never replayed ------------------------------------------------------


def test_replay_in_a_new_process_refuses_a_logged_escape(target: Target, tmp_path: Path) -> None:
    """A statement log holding an escape (written before confinement, or edited) makes the
    sandbox lost when replayed, with the reason, and the escape never runs."""
    root = tmp_path / "sandboxes" / "target-db"
    victim = tmp_path / "victim.db"
    before = target.committed()
    run_process(target, root, ["create"], ["exec", "INSERT INTO notes VALUES (3, 'third')"])
    if target.dialect == "sqlite":
        escapes = [f"; ATTACH DATABASE '{victim}' AS v", "CREATE TABLE v.stolen (a)"]
    else:
        escapes = [f"COPY items TO '{victim}'"]
    with (root / LOG_FILE_NAME).open("a") as log:
        for sql in escapes:
            log.write(json.dumps({"sql": sql, "params": None, "after": -1}) + "\n")
    seen = run_process(target, root, ["open"])
    assert seen["status"] == "lost"
    reason = seen["lost_reason"]
    assert "replaying statement 2 of" in reason, reason
    assert "not authorized" in reason or "refused" in reason, reason
    assert not victim.exists()
    assert target.committed() == before


# -- PostgreSQL ------------------------------------------------------------------------------

POSTGRES_ESCAPES = [
    "COPY items TO '{x}'",
    "copy (SELECT 1) to '{x}'",
    "COPY items TO PROGRAM 'touch {x}'",
    "COPY items FROM PROGRAM 'touch {x}'",
    "  /* c */ COPY notes FROM '{agents}'",
    "SELECT pg_read_file('/etc/hostname')",
    "select pg_catalog.pg_read_binary_file('{agents}')",
    'SELECT "pg_read_file"(:path)',
    "SELECT * FROM pg_ls_dir('/')",
    "SELECT lo_export(lo_from_bytea(0, 'x'), '{x}')",
    "SELECT lo_import('{agents}')",
    "SET ROLE postgres",
    "set session authorization postgres",
    "SELECT set_config('role', 'postgres', false)",
    "DO $$BEGIN EXECUTE 'COPY items TO ''{x}'''; END$$",
    "CREATE FUNCTION leak() RETURNS int LANGUAGE plpgsql AS "
    "$f$BEGIN EXECUTE 'co' || 'py items to ''{x}'''; RETURN 1; END$f$",
    "SELECT query_to_xml('select pg_read_file(''/etc/hostname'')', true, true, '')",
    "CREATE FUNCTION leak2() RETURNS void LANGUAGE sql AS 'COPY items TO ''{x}'''",
    "CREATE FUNCTION native() RETURNS void LANGUAGE c AS '/tmp/lib.so', 'f'",
    "CREATE EXTENSION dblink",
    "SELECT 1 WHERE 'a' like'\\' ; COPY items TO '{x}'; --'",
    "SELECT $$'$$; COPY items TO '{x}'; SELECT $$'$$",
    "LOAD 'plpgsql'",
    "SELECT 1; SET standard_conforming_strings = off",
]


@pytest.fixture
def postgres_tool(
    postgres_url: str, tmp_path: Path, sqlite_store: Store
) -> Iterator[tuple[PlanSandboxes, ToolContext]]:
    """A plan with one PostgreSQL database resource and its sandbox, as Execute makes it."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(postgres_url, poolclass=NullPool)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)"))
        connection.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"))
        connection.execute(text("INSERT INTO items VALUES (1, 'apple')"))
    engine.dispose()
    resource = Resource(
        resource_id=DB,
        kind="database",
        location=postgres_url,
        sandbox_strategy="transaction_rollback",
    )
    plan = Plan(action="local/tools", phase="execute", state="running")
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.plans.add(plan)
        uow.commit()
    sandboxes = PlanSandboxes(sqlite_store, plan.plan_id, tmp_path / "sandboxes")
    sandboxes.create(resource)
    yield sandboxes, ToolContext(plan_id=plan.plan_id, phase=Phase.EXECUTE, sandboxes=sandboxes)
    for resource_id in sandboxes.open_ids():
        sandboxes.get(resource_id).discard()


@pytest.mark.postgres
@pytest.mark.parametrize("sql", POSTGRES_ESCAPES)
def test_each_postgres_escape_is_a_one_line_tool_error(
    postgres_tool: tuple[PlanSandboxes, ToolContext], tmp_path: Path, sql: str
) -> None:
    _, context = postgres_tool
    x = tmp_path / "escape-x"
    filled = sql.format(x=x, agents=tmp_path / "agents.db")
    run_sql = default_registry().tool("local/run-sql")
    arguments: dict[str, object] = {"resource": DB, "sql": filled}
    if ":path" in filled:
        arguments["params"] = {"path": "/etc/hostname"}
    outcome = run_sql.run(context, arguments)
    refused(outcome)
    assert "refused in the sandbox of local/db" in outcome.output
    assert "reaches only the resource's own database" in outcome.output
    assert not x.exists()
    # Refused before it was sent: the transaction is not failed and goes on.
    after = run_sql.run(context, {"resource": DB, "sql": "SELECT name FROM items"})
    assert after.ok, after.output


@pytest.mark.postgres
def test_ordinary_postgres_sql_still_runs(postgres_tool: tuple[PlanSandboxes, ToolContext]) -> None:
    _, context = postgres_tool
    run_sql = default_registry().tool("local/run-sql")
    for sql in (
        "INSERT INTO items VALUES (2, 'pear') ON CONFLICT DO NOTHING",
        "INSERT INTO items VALUES (2, 'pear') ON CONFLICT (id) DO UPDATE SET name = 'copy'",
        "UPDATE notes SET body = E'it\\'s -- not a comment' WHERE id = 1",
        "INSERT INTO notes VALUES (5, 'a copy of the report; do set role later')",
        'SELECT "name" AS "copy" FROM items WHERE name <> \'COPY items TO x\'',
        "CREATE FUNCTION bump() RETURNS trigger LANGUAGE plpgsql AS "
        "$$BEGIN NEW.name := upper(NEW.name); RETURN NEW; END$$",
        "CREATE TRIGGER bumped BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION bump()",
    ):
        outcome = run_sql.run(context, {"resource": DB, "sql": sql})
        assert outcome.ok, (sql, outcome.output)
