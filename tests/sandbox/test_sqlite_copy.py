"""The SQLite database sandbox as a copy of the file: exact rollback and an exact Apply.

Real SQLite files throughout; "another process" is a real child process.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.database import DatabaseStrategy
from cleveragents_tui.sandbox.sqlite_copy import SqliteCopySandbox
from cleveragents_tui.sandbox.transaction import SqlStatementError

SCHEMA = """
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL,
                    at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
                    token INTEGER NOT NULL DEFAULT (random()));
CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, what TEXT, nonce INTEGER);
CREATE TABLE tags (name TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID;
INSERT INTO items (id, name, at, token) VALUES (1, 'one', 'then', 1), (2, 'two', 'then', 2);
CREATE TRIGGER items_log AFTER INSERT ON items BEGIN
    INSERT INTO log (what, nonce) VALUES ('added ' || NEW.name, random());
END;
"""


def dump(path: Path) -> dict[str, Any]:
    """Every row and schema object of the database ``path``."""
    connection = sqlite3.connect(path)
    try:
        schema = connection.execute(
            "SELECT type, name, sql FROM sqlite_master ORDER BY type, name"
        ).fetchall()
        tables = [n for t, n, _ in schema if t == "table"]
        rows = {
            name: sorted(connection.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
            for name in tables
        }
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        return {"schema": schema, "rows": rows, "user_version": version}
    finally:
        connection.close()


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA)
    connection.close()
    return path


@pytest.fixture
def resource(target: Path) -> Resource:
    return Resource(
        resource_id="t/app-db",
        kind="database",
        location=str(target),
        sandbox_strategy="transaction_rollback",
    )


@pytest.fixture
def sandbox(resource: Resource, tmp_path: Path) -> SqliteCopySandbox:
    made = DatabaseStrategy().create(resource, "PLAN", tmp_path / "sandbox")
    assert isinstance(made, SqliteCopySandbox)
    return made


def work_rows(sandbox: SqliteCopySandbox) -> dict[str, Any]:
    return dump(sandbox.root / "work.db")


def test_rollback_in_another_process_restores_the_rows_a_trigger_and_now_made(
    sandbox: SqliteCopySandbox, resource: Resource, tmp_path: Path
) -> None:
    """A checkpoint holds the values SQLite computed; another process rolls back to it and
    the copy is byte-for-byte those rows, not a re-computation."""
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    ref = sandbox.checkpoint()
    at_checkpoint = work_rows(sandbox)
    sandbox.execute("INSERT INTO items (name) VALUES ('four')")
    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    assert work_rows(sandbox) != at_checkpoint
    script = (
        "import sys; from pathlib import Path\n"
        "from cleveragents_tui.domain.resource import Resource\n"
        "from cleveragents_tui.sandbox.database import DatabaseStrategy\n"
        f"r = Resource.model_validate_json({resource.model_dump_json()!r})\n"
        f"DatabaseStrategy().open(r, 'PLAN', Path({str(sandbox.root)!r})).rollback({ref!r})\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert work_rows(sandbox) == at_checkpoint
    sandbox.verify(ref)


def test_apply_lands_exactly_the_rows_the_plan_made_and_fires_no_trigger_again(
    sandbox: SqliteCopySandbox, target: Path
) -> None:
    sandbox.execute("INSERT INTO items (name) VALUES ('three')")
    sandbox.execute("DELETE FROM items WHERE id = 2")
    sandbox.execute("INSERT INTO tags (name, n) VALUES ('x', 1)")
    sandbox.execute("CREATE TABLE notes (body TEXT)")
    sandbox.execute("CREATE INDEX items_name ON items (name)")
    sandbox.execute("ALTER TABLE log ADD COLUMN extra TEXT DEFAULT 'e'")
    sandbox.execute("INSERT INTO notes VALUES ('n')")
    sandbox.execute("PRAGMA user_version = 3")
    produced = work_rows(sandbox)

    result = sandbox.apply()

    assert dump(target) == produced
    assert "items/3" in {change.path for change in result.changes}
    assert sandbox.apply().summary.startswith("already applied")
    with pytest.raises(CheckpointMissingError, match="was applied"):
        sandbox.checkpoint()


def test_apply_keeps_rows_others_changed_meanwhile_that_the_plan_did_not_touch(
    sandbox: SqliteCopySandbox, target: Path
) -> None:
    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE items SET name = 'deux' WHERE id = 2")
    connection.close()

    sandbox.apply()

    rows = dump(target)["rows"]["items"]
    assert [(r[0], r[1]) for r in rows] == [(1, "uno"), (2, "deux")]


def test_apply_refuses_a_conflict_in_one_line_and_lands_nothing(
    sandbox: SqliteCopySandbox, target: Path
) -> None:
    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    sandbox.execute("INSERT INTO tags (name, n) VALUES ('x', 1)")
    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE items SET name = 'one!' WHERE id = 1")
    connection.close()
    before = dump(target)

    with pytest.raises(SandboxError) as raised:
        sandbox.apply()

    assert "nothing was applied to t/app-db" in raised.value.problem
    assert "row (1,) of table items changed" in raised.value.problem
    assert "\n" not in str(raised.value)
    assert dump(target) == before
    sandbox.execute("SELECT 1")  # still open: the plan can be corrected or discarded


def test_transaction_control_and_attach_are_refused(sandbox: SqliteCopySandbox) -> None:
    for sql in ("BEGIN", "COMMIT", "SAVEPOINT x", "ATTACH DATABASE '/tmp/x.db' AS x"):
        with pytest.raises(SqlStatementError, match="refused"):
            sandbox.execute(sql)


def test_a_dropped_checkpoint_is_missing_and_discard_leaves_the_target(
    sandbox: SqliteCopySandbox, target: Path
) -> None:
    before = dump(target)
    ref = sandbox.checkpoint()
    sandbox.drop_checkpoint(ref)
    with pytest.raises(CheckpointMissingError):
        sandbox.rollback(ref)
    sandbox.execute("DELETE FROM items")
    sandbox.discard()
    assert not sandbox.root.exists()
    assert dump(target) == before


def test_a_savepoint_sandbox_made_before_copies_existed_still_opens_as_one(
    resource: Resource, tmp_path: Path
) -> None:
    from cleveragents_tui.sandbox.transaction import (
        TransactionRollbackSandbox,
        TransactionRollbackStrategy,
    )

    root = tmp_path / "old"
    old = TransactionRollbackStrategy().create(resource, "PLAN", root)
    try:
        assert isinstance(
            DatabaseStrategy().open(resource, "PLAN", root), TransactionRollbackSandbox
        )
    finally:
        old.discard()


def test_a_wal_database_written_meanwhile_is_copied_and_landed_exactly(
    resource: Resource, target: Path, tmp_path: Path
) -> None:
    """A target in WAL mode with a reader open: the sandbox copies what is committed, and
    Apply lands into it."""
    with sqlite3.connect(target) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("INSERT INTO items (id, name) VALUES (5, 'five')")
    reader = sqlite3.connect(target)
    try:
        reader.execute("SELECT count(*) FROM items").fetchone()
        sandbox = DatabaseStrategy().create(resource, "PLAN", tmp_path / "wal")
        assert isinstance(sandbox, SqliteCopySandbox)
        sandbox.execute("UPDATE items SET name = 'FIVE' WHERE id = 5")
        ref = sandbox.checkpoint()
        sandbox.execute("DELETE FROM items")
        sandbox.rollback(ref)
        produced = work_rows(sandbox)["rows"]
        sandbox.apply()
    finally:
        reader.close()
    assert dump(target)["rows"] == produced


def test_the_dry_run_foresees_a_conflict_reading_only(
    sandbox: SqliteCopySandbox, target: Path, tmp_path: Path
) -> None:
    """``apply_refusal`` (``plan apply --dry-run``) names the conflict Apply then raises,
    word for word, without a byte written in the target or the sandbox; a row the plan did
    not touch, or the target already holding the plan's rows, is no conflict."""
    from tests.sandbox.test_pending_changes import files

    sandbox.execute("UPDATE items SET name = 'uno' WHERE id = 1")
    assert sandbox.apply_refusal() is None
    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE items SET name = 'zwei' WHERE id = 2")  # not the plan's
    connection.close()
    assert sandbox.apply_refusal() is None
    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE items SET name = 'one!' WHERE id = 1")
    connection.close()
    before = files(tmp_path)
    refusal = sandbox.apply_refusal()
    assert files(tmp_path) == before
    assert refusal is not None and refusal.problem.endswith("row (1,) of table items changed")
    with pytest.raises(SandboxError) as raised:
        sandbox.apply()
    assert str(raised.value) == str(refusal)
    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE items SET name = 'uno' WHERE id = 1")  # the plan's own
    connection.close()
    assert sandbox.apply_refusal() is None
    sandbox.apply()
    assert sandbox.apply_refusal() is None  # applied: Apply lands nothing more
