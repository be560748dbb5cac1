"""The PostgreSQL database sandbox as copies of the database: exact rollback in any process,
an exact Apply, and what it refuses.

A real PostgreSQL server throughout (the throwaway one of tests/conftest.py); "another
process" is a real child process.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.failpoints import InjectedFault
from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.database import DatabaseStrategy
from cleveragents_tui.sandbox.postgres_copy import STATE_FILE_NAME, PostgresCopySandbox
from cleveragents_tui.sandbox.transaction import (
    SqlStatementError,
    TransactionRollbackSandbox,
)

pytestmark = pytest.mark.postgres

SCHEMA = [
    "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, "
    "at timestamptz NOT NULL DEFAULT now(), token float8 NOT NULL DEFAULT random(), "
    "uid uuid NOT NULL DEFAULT gen_random_uuid(), "
    "shout text GENERATED ALWAYS AS (upper(name)) STORED)",
    "CREATE TABLE log (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "item integer REFERENCES items (id) ON DELETE CASCADE, what text, at timestamptz)",
    "CREATE TABLE tags (label text, n integer)",  # no primary key
    "INSERT INTO items (name, at, token, uid) VALUES "
    "('one', '2020-01-01+00', 0.25, '00000000-0000-0000-0000-000000000001'), "
    "('two', '2020-01-02+00', 0.5, '00000000-0000-0000-0000-000000000002')",
    "INSERT INTO tags VALUES ('a', 1), ('a', 1), ('b', 2)",
    "CREATE FUNCTION log_item() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
    "INSERT INTO log (item, what, at) VALUES (NEW.id, 'added ' || NEW.name, "
    "clock_timestamp()); RETURN NEW; END$$",
    "CREATE TRIGGER items_log AFTER INSERT ON items FOR EACH ROW EXECUTE FUNCTION log_item()",
]


def run(url: str, *statements: str) -> list[list[tuple[Any, ...]]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text("SET TimeZone = 'UTC'"))
            out = []
            for statement in statements:
                result = connection.execute(text(statement))
                out.append([tuple(r) for r in result] if result.returns_rows else [])
            return out
    finally:
        engine.dispose()


def dump(url: str) -> dict[str, Any]:
    """Every row (as PostgreSQL prints it) and every sequence's position."""
    tables = ("items", "log", "tags")
    found = run(
        url,
        *(f"SELECT t::text FROM {name} AS t ORDER BY t::text" for name in tables),
        "SELECT last_value, is_called FROM items_id_seq",
        "SELECT last_value, is_called FROM log_id_seq",
    )
    rows = {name: [r[0] for r in got] for name, got in zip(tables, found, strict=False)}
    return {**rows, "sequences": found[3:]}


def databases(url: str) -> set[str]:
    found = run(url, "SELECT datname FROM pg_database WHERE datname LIKE 'agents\\_%'")[0]
    return {str(name) for (name,) in found}


@pytest.fixture
def target(postgres_url: str) -> Iterator[str]:
    run(postgres_url, *SCHEMA)
    yield postgres_url
    engine = create_engine(postgres_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        for name in databases(postgres_url):
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    engine.dispose()


@pytest.fixture
def resource(target: str) -> Resource:
    return Resource(
        resource_id="t/app-db",
        kind="database",
        location=target,
        sandbox_strategy="transaction_rollback",
    )


@pytest.fixture
def sandbox(resource: Resource, tmp_path: Path) -> PostgresCopySandbox:
    made = DatabaseStrategy().create(resource, "PLAN", tmp_path / "sandbox")
    assert isinstance(made, PostgresCopySandbox)
    return made


def work_url(target: str, sandbox: PostgresCopySandbox, what: str = "work") -> str:
    prefix = sandbox._prefix
    assert prefix is not None
    name = PostgresCopySandbox.database(prefix, what)
    return make_url(target).set(database=name).render_as_string(hide_password=False)


def test_rollback_in_another_process_restores_rows_and_sequences_exactly(
    sandbox: PostgresCopySandbox, resource: Resource, target: str
) -> None:
    """A checkpoint holds the values the server computed (now(), random(), uuids, the
    trigger's clock_timestamp(), serial and identity positions); another process rolls back
    to it and the copy holds exactly those, not a re-computation."""
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    ref = sandbox.checkpoint()
    at_checkpoint = dump(work_url(target, sandbox))
    sandbox.execute("INSERT INTO items (name) VALUES ('four')")
    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    assert dump(work_url(target, sandbox)) != at_checkpoint
    script = (
        "from pathlib import Path\n"
        "from cleveragents_tui.domain.resource import Resource\n"
        "from cleveragents_tui.sandbox.database import DatabaseStrategy\n"
        f"r = Resource.model_validate_json({resource.model_dump_json()!r})\n"
        f"DatabaseStrategy().open(r, 'PLAN', Path({str(sandbox.root)!r})).rollback({ref!r})\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert dump(work_url(target, sandbox)) == at_checkpoint
    sandbox.verify(ref)
    # The next id is the one after the checkpoint's, as if 'four' never ran.
    (row,) = sandbox.execute("INSERT INTO items (name) VALUES ('five') RETURNING id").all()
    assert row[0] == 4


def test_apply_lands_exactly_the_rows_the_plan_made_and_fires_no_trigger_again(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    sandbox.execute("DELETE FROM items WHERE id = 2")  # cascades to nothing: no log row yet
    sandbox.execute("UPDATE items SET name = 'uno', token = random() WHERE id = 1")
    sandbox.execute("DELETE FROM tags WHERE ctid = (SELECT min(ctid) FROM tags WHERE label = 'a')")
    sandbox.execute("INSERT INTO tags VALUES ('c', 3)")
    produced = dump(work_url(target, sandbox))
    changes = {change.path for change in sandbox.changes_since_baseline()}
    assert {"items/1", "items/2", "items/3", "log/1"} <= changes

    result = sandbox.apply()

    assert dump(target) == produced
    assert "landed the sandbox of t/app-db in one transaction" in result.summary
    assert sandbox.apply().summary.startswith("already applied")
    # The trigger is enabled again on the real table, and ids go on after the plan's.
    run(target, "INSERT INTO items (name) VALUES ('later')")
    assert run(target, "SELECT item, what FROM log ORDER BY id")[0] == [
        (3, "added three"),
        (4, "added later"),
    ]
    with pytest.raises(CheckpointMissingError, match="was applied"):
        sandbox.checkpoint()


def test_an_apply_that_committed_and_was_not_recorded_counts_as_landed(
    sandbox: PostgresCopySandbox, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Landed, then stopped before the sandbox recorded it: the rerun finds the plan's rows
    in the real database and writes nothing twice."""
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    produced = dump(work_url(target, sandbox))
    monkeypatch.setenv("AGENTS_FAILPOINTS", "postgres.land@committed")
    with pytest.raises(InjectedFault):
        sandbox.apply()
    assert dump(target) == produced
    monkeypatch.delenv("AGENTS_FAILPOINTS")
    assert "were already there" in sandbox.apply().summary
    assert dump(target) == produced


def test_an_apply_stopped_before_commit_lands_nothing_and_lands_on_the_rerun(
    sandbox: PostgresCopySandbox, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    produced, before = dump(work_url(target, sandbox)), dump(target)
    monkeypatch.setenv("AGENTS_FAILPOINTS", "postgres.land@commit")
    with pytest.raises(InjectedFault):
        sandbox.apply()
    # No row landed; sequences, which PostgreSQL never rolls back, only moved forward.
    after = dump(target)
    assert {**after, "sequences": None} == {**before, "sequences": None}
    assert after["sequences"] == produced["sequences"]
    monkeypatch.delenv("AGENTS_FAILPOINTS")
    assert "2 rows written" in sandbox.apply().summary  # the item and its log line
    assert dump(target) == produced


def test_a_conflict_lands_nothing_and_says_which_row(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    run(target, "UPDATE items SET name = 'ein' WHERE id = 1")
    before = dump(target)
    with pytest.raises(SandboxError) as raised:
        sandbox.apply()
    assert "nothing was applied to t/app-db" in raised.value.problem
    assert "row 1 of table items changed" in raised.value.problem
    assert dump(target) == before
    # Rows the plan did not touch may change meanwhile: once the conflict is gone, it lands.
    run(
        target,
        "UPDATE items SET name = 'one' WHERE id = 1",
        "UPDATE items SET name = 'zwei' WHERE id = 2",
    )
    sandbox.apply()
    assert [r[0] for r in run(target, "SELECT name FROM items ORDER BY id")[0]] == [
        "uno",
        "zwei",
        "three",
    ]


def schema(url: str) -> list[tuple[Any, ...]]:
    """The columns (with defaults) and indexes of the public tables."""
    columns, indexes = run(
        url,
        "SELECT table_name, column_name, data_type, column_default FROM "
        "information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2",
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
    )
    return columns + indexes


def test_apply_lands_the_schema_changes_with_the_values_the_sandbox_gave(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    """A table created and filled, a column added with DEFAULT now() (filled in the
    sandbox), an index: Apply runs the schema statements again, then lands the rows with
    the sandbox's values, not the ones the statements give at Apply."""
    sandbox.execute(
        "CREATE TABLE notes (id serial PRIMARY KEY, body text, at timestamptz DEFAULT now())"
    )
    sandbox.execute("INSERT INTO notes (body) VALUES ('first'), ('second')")
    sandbox.execute("ALTER TABLE items ADD COLUMN seen timestamptz NOT NULL DEFAULT now()")
    sandbox.execute("CREATE INDEX items_name ON items (name)")
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    produced = dump(work_url(target, sandbox))
    notes = run(work_url(target, sandbox), "SELECT t::text FROM notes t ORDER BY id")[0]
    shape = schema(work_url(target, sandbox))

    sandbox.apply()

    assert dump(target) == produced
    assert run(target, "SELECT t::text FROM notes t ORDER BY id")[0] == notes
    assert schema(target) == shape
    assert run(target, "INSERT INTO notes (body) VALUES ('later') RETURNING id")[0] == [(3,)]


def test_a_rollback_takes_back_the_schema_statements_after_its_checkpoint(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    sandbox.execute("CREATE TABLE kept (x integer)")
    ref = sandbox.checkpoint()
    sandbox.execute("CREATE TABLE undone (x integer)")
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    sandbox.rollback(ref)
    sandbox.apply()
    tables = run(target, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")[0]
    assert sorted(name for (name,) in tables) == ["items", "kept", "log", "tags"]
    assert run(target, "SELECT count(*) FROM items")[0] == [(2,)]


def test_a_schema_change_no_statement_explains_lands_nothing(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    """A function that runs DDL changes the sandbox's schema behind the statement log:
    Apply finds that the statements do not give the sandbox's schema, and writes nothing."""
    sandbox.execute(
        "CREATE FUNCTION make_table() RETURNS void LANGUAGE plpgsql AS "
        "$$BEGIN CREATE TABLE sneaky (x integer); END$$"
    )
    sandbox.execute("SELECT make_table()")
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    before, shape = dump(target), schema(target)
    with pytest.raises(SandboxError) as raised:
        sandbox.apply()
    assert (
        "the plan's schema statements gave the real database another schema than its "
        "sandbox (table public.sneaky)"
    ) in raised.value.problem, raised.value.problem
    assert "\n" not in raised.value.problem
    assert dump(target) == before and schema(target) == shape
    assert run(target, "SELECT count(*) FROM pg_proc WHERE proname = 'make_table'")[0] == [(0,)]


@pytest.mark.parametrize(
    "sql",
    [
        "DROP DATABASE {target}",
        "ALTER DATABASE {target} RENAME TO gone",
        "ALTER DATABASE {target} SET search_path = nowhere",
        "CREATE TABLESPACE t LOCATION '/tmp'",
        "GRANT CREATE ON DATABASE {target} TO PUBLIC",
        "COMMENT ON DATABASE {target} IS 'x'",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
        "COMMIT",
    ],
)
def test_statements_that_reach_past_the_copy_are_refused(
    sandbox: PostgresCopySandbox, target: str, sql: str
) -> None:
    name = make_url(target).database
    with pytest.raises(SqlStatementError, match="refused in the sandbox of t/app-db"):
        sandbox.execute(sql.format(target=f'"{name}"'))
    assert run(target, "SELECT count(*) FROM items")[0] == [(2,)]


def test_a_column_named_database_is_not_a_database(sandbox: PostgresCopySandbox) -> None:
    sandbox.execute("CREATE TABLE sources (database text, tablespace text)")
    sandbox.execute("INSERT INTO sources (database) VALUES ('crm')")
    assert sandbox.execute("SELECT database FROM sources").all() == [("crm",)]


def test_a_failed_statement_changes_nothing_and_the_next_one_runs(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    with pytest.raises(SqlStatementError, match="division by zero"):
        sandbox.execute("INSERT INTO items (name) SELECT 'x' WHERE 1/0 = 1")
    assert sandbox.execute("SELECT count(*) FROM items").all() == [(2,)]


def test_a_rollback_cut_short_is_finished_by_the_next_operation(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    """Killed after the old working copy was dropped and before the new one was renamed:
    the next operation, in any process, finds the checkpoint's copy and finishes."""
    ref = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    state = (sandbox.root / STATE_FILE_NAME).read_text()
    engine = create_engine(target, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    prefix = sandbox._prefix
    assert prefix is not None
    with engine.connect() as connection:
        connection.exec_driver_sql(
            f'CREATE DATABASE "agents_{prefix}_next" TEMPLATE "agents_{prefix}_{ref}"'
        )
        connection.exec_driver_sql(f'DROP DATABASE "agents_{prefix}_work"')
    engine.dispose()
    (sandbox.root / STATE_FILE_NAME).write_text(
        state.replace('"replacing": false', '"replacing": true')
    )

    assert sandbox.execute("SELECT count(*) FROM items").all() == [(2,)]
    assert not any(name.endswith("_next") for name in databases(target))


def test_discard_drops_every_database_of_the_sandbox(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    sandbox.checkpoint()
    sandbox.checkpoint()
    assert len(databases(target)) == 4  # base, work, two checkpoints
    sandbox.discard()
    assert databases(target) == set()
    assert not sandbox.root.exists()
    assert run(target, "SELECT count(*) FROM items")[0] == [(2,)]


def test_a_target_others_are_connected_to_gets_the_savepoint_sandbox(
    resource: Resource, target: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL copies a database only while nobody is connected to it: the sandbox is
    then a transaction with savepoints, and the log says why."""
    engine = create_engine(target, poolclass=NullPool)
    with engine.connect() as busy, caplog.at_level(logging.WARNING):
        busy.execute(text("SELECT 1"))
        made = DatabaseStrategy().create(resource, "PLAN", tmp_path / "busy")
    engine.dispose()
    try:
        assert isinstance(made, TransactionRollbackSandbox)
        assert "cannot copy the database" in caplog.text
        assert "is being accessed by other users" in caplog.text
        assert isinstance(
            DatabaseStrategy().open(resource, "PLAN", tmp_path / "busy"),
            TransactionRollbackSandbox,
        )
    finally:
        made.discard()
    assert databases(target) == set()


def test_postgres_copy_reads_a_rollback_cut_short_without_finishing_it(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    """Killed between dropping the working copy and renaming ``next`` (as
    the cut-short rollback above): the dry run reads ``next``, and leaves the
    state file and the databases for the next real operation to settle."""
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    ref = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items (name) VALUES ('four')")
    state = (sandbox.root / STATE_FILE_NAME).read_text()
    prefix = sandbox._prefix
    engine = create_engine(target, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql(
            f'CREATE DATABASE "agents_{prefix}_next" TEMPLATE "agents_{prefix}_{ref}"'
        )
        connection.exec_driver_sql(f'DROP DATABASE "agents_{prefix}_work"')
    engine.dispose()
    cut_short = state.replace('"replacing": false', '"replacing": true')
    (sandbox.root / STATE_FILE_NAME).write_text(cut_short)
    present = databases(target)

    pending = sandbox.pending_changes()

    assert (sandbox.root / STATE_FILE_NAME).read_text() == cut_short
    assert databases(target) == present
    assert "items/3" in {c.path for c in pending} and "items/4" not in {c.path for c in pending}
    assert pending == sandbox.changes_since_baseline()  # which settles it


def test_the_dry_run_foresees_a_conflict_reading_only(
    sandbox: PostgresCopySandbox, target: str
) -> None:
    """``apply_refusal`` (``plan apply --dry-run``) names the conflict Apply then raises,
    word for word, in a read-only transaction (no row locked, nothing written); a row the
    plan did not touch is no conflict, nor the target already holding the plan's rows."""
    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    sandbox.execute("DELETE FROM tags WHERE label = 'b'")
    assert sandbox.apply_refusal() is None
    run(target, "UPDATE items SET name = 'zwei' WHERE id = 2")  # not the plan's
    assert sandbox.apply_refusal() is None
    run(target, "UPDATE items SET name = 'ein' WHERE id = 1")
    before = (dump(target), databases(target))
    refusal = sandbox.apply_refusal()
    assert (dump(target), databases(target)) == before
    assert refusal is not None and "row 1 of table items changed" in refusal.problem
    with pytest.raises(SandboxError) as raised:
        sandbox.apply()
    assert str(raised.value) == str(refusal)
    run(target, "UPDATE items SET name = 'one' WHERE id = 1", "DELETE FROM tags WHERE label = 'b'")
    refusal = sandbox.apply_refusal()  # the row the plan deletes, gone: a table without a key
    assert refusal is not None and "rows of table" in refusal.problem
    run(target, "INSERT INTO tags VALUES ('b', 2)")
    assert sandbox.apply_refusal() is None
    sandbox.apply()
    assert sandbox.apply_refusal() is None


def test_the_dry_run_foresees_a_changed_schema(sandbox: PostgresCopySandbox, target: str) -> None:
    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    run(target, "ALTER TABLE items ALTER COLUMN token DROP DEFAULT")
    refusal = sandbox.apply_refusal()
    assert refusal is not None and "changed its schema" in refusal.problem
    with pytest.raises(SandboxError) as raised:
        sandbox.apply()
    assert str(raised.value) == str(refusal)
