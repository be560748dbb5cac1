"""The transaction_rollback sandbox against a real SQLite file and a real PostgreSQL server."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.pool import NullPool

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    Change,
    ChangeKind,
    CheckpointMissingError,
    Sandbox,
    SandboxError,
    SandboxStrategy,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError
from cleveragents_tui.sandbox.transaction import (
    SqlStatementError,
    TransactionRollbackSandbox,
    TransactionRollbackStrategy,
)
from cleveragents_tui.sandbox.transaction.state import STATE_FILE_NAME

REPO = Path(__file__).resolve().parents[2]
PLAN = "01J0000000000000000000PLAN"

SEED = [
    "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, qty INTEGER NOT NULL)",
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
    "CREATE TABLE log (msg TEXT)",
    "CREATE TABLE pairs (a TEXT, b INTEGER, v TEXT, PRIMARY KEY (a, b))",
    "INSERT INTO items VALUES (1, 'apple', 3), (2, 'pear', 5), (3, 'plum', 7)",
    "INSERT INTO notes VALUES (1, 'first'), (2, 'second')",
    "INSERT INTO log VALUES ('boot')",
    "INSERT INTO pairs VALUES ('x,y/z', 1, 'odd key')",
]
TABLES = ("items", "notes", "log", "pairs")


@dataclass(frozen=True)
class Target:
    """The user's database: ``location`` as a resource names it, ``url`` for our own checks."""

    location: str
    url: str
    dialect: str

    def engine(self) -> Engine:
        return create_engine(self.url, poolclass=NullPool)

    def committed(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every seeded table's rows as another client sees them (committed state)."""
        engine = self.engine()
        try:
            with engine.connect() as connection:
                present = set(inspect(connection).get_table_names())
                return {
                    table: [
                        tuple(row)
                        for row in connection.execute(text(f"SELECT * FROM {table} ORDER BY 1"))
                    ]
                    for table in sorted(present)
                }
        finally:
            engine.dispose()


def _seed(target: Target) -> Target:
    engine = target.engine()
    try:
        with engine.begin() as connection:
            for statement in SEED:
                connection.execute(text(statement))
    finally:
        engine.dispose()
    return target


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "sqlite":
        path = tmp_path / "target.db"
        sqlite3.connect(path).close()
        return _seed(Target(str(path), f"sqlite:///{path}", "sqlite"))
    url = str(request.getfixturevalue("postgres_url"))
    return _seed(Target(url, url, "postgresql"))


def _resource(location: str) -> Resource:
    return Resource(
        resource_id="local/target-db",
        kind="database",
        location=location,
        sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK,
    )


@pytest.fixture
def resource(target: Target) -> Resource:
    return _resource(target.location)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sandboxes" / "target-db"


@pytest.fixture
def make_sandbox(
    resource: Resource, root: Path
) -> Iterator[Callable[..., TransactionRollbackSandbox]]:
    """Creates sandboxes and discards them all at teardown, so no connection outlives a test."""
    made: list[TransactionRollbackSandbox] = []

    def make(**options: int) -> TransactionRollbackSandbox:
        sandbox = TransactionRollbackStrategy(**options).create(resource, PLAN, root)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.discard()


@pytest.fixture
def sandbox(
    make_sandbox: Callable[..., TransactionRollbackSandbox],
) -> TransactionRollbackSandbox:
    return make_sandbox()


def view(sandbox: TransactionRollbackSandbox) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows as the sandbox's transaction sees them."""
    tables = sandbox.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        if sandbox.dialect == "sqlite"
        else "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
    )
    return {
        table: [tuple(row) for row in sandbox.execute(f"SELECT * FROM {table} ORDER BY 1")]
        for (table,) in tables.all()
    }


def make_changes(sandbox: TransactionRollbackSandbox) -> None:
    """Inserts, updates and deletes in several tables, and a table created during Execute."""
    sandbox.execute(
        "INSERT INTO items VALUES (:id, :name, :qty)", {"id": 4, "name": "fig", "qty": 1}
    )
    sandbox.execute("UPDATE items SET qty = qty + 10 WHERE id = 1")
    sandbox.execute("DELETE FROM items WHERE id = 2")
    sandbox.execute("UPDATE notes SET body = 'edited' WHERE id = 2")
    sandbox.execute("INSERT INTO log VALUES ('changed')")
    sandbox.execute("CREATE TABLE extra (id INTEGER PRIMARY KEY, tag TEXT)")
    sandbox.execute(
        "INSERT INTO extra VALUES (:id, :tag)", [{"id": 1, "tag": "a"}, {"id": 2, "tag": "b"}]
    )


def test_matches_the_protocols(sandbox: TransactionRollbackSandbox) -> None:
    strategy: SandboxStrategy = TransactionRollbackStrategy()
    assert strategy.name is SandboxStrategyName.TRANSACTION_ROLLBACK
    assert isinstance(sandbox, Sandbox)
    assert sandbox.workdir is None
    assert sandbox.status == "open"
    assert not sandbox.lost


def test_rollback_gives_back_exactly_the_checkpointed_rows(
    sandbox: TransactionRollbackSandbox, target: Target
) -> None:
    seeded = target.committed()
    sandbox.execute("INSERT INTO notes VALUES (3, 'before the checkpoint')")
    before = view(sandbox)
    ref = sandbox.checkpoint()
    assert ref.startswith("sp_")
    make_changes(sandbox)
    assert view(sandbox) != before

    sandbox.rollback(ref)

    assert view(sandbox) == before
    assert "extra" not in before
    sandbox.verify(ref)  # ROLLBACK TO keeps the savepoint itself
    make_changes(sandbox)
    sandbox.rollback(ref)
    assert view(sandbox) == before
    assert target.committed() == seeded


def test_rollback_to_an_earlier_checkpoint_invalidates_later_ones(
    sandbox: TransactionRollbackSandbox,
) -> None:
    first = sandbox.checkpoint()
    at_first = view(sandbox)
    sandbox.execute("INSERT INTO items VALUES (10, 'kiwi', 1)")
    second = sandbox.checkpoint()
    sandbox.execute("DELETE FROM notes")
    third = sandbox.checkpoint()
    sandbox.execute("CREATE TABLE later (id INTEGER PRIMARY KEY)")
    assert sandbox.checkpoints == (first, second, third)

    sandbox.rollback(first)

    assert view(sandbox) == at_first
    assert list(sandbox.checkpoints) == [first]
    for gone in (second, third):
        with pytest.raises(CheckpointMissingError, match=f"{gone}.*rolled back to {first}"):
            sandbox.verify(gone)
        with pytest.raises(CheckpointMissingError):
            sandbox.rollback(gone)
    sandbox.verify(first)
    assert view(sandbox) == at_first
    # a new checkpoint after the rollback is a fresh, valid savepoint
    fourth = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items VALUES (11, 'lime', 2)")
    sandbox.rollback(fourth)
    assert view(sandbox) == at_first


def test_uncommitted_changes_stay_invisible_to_other_clients(
    sandbox: TransactionRollbackSandbox, target: Target
) -> None:
    seeded = target.committed()
    make_changes(sandbox)
    assert target.committed() == seeded


def test_apply_commits_for_everyone(
    sandbox: TransactionRollbackSandbox, target: Target, resource: Resource, root: Path
) -> None:
    ref = sandbox.checkpoint()
    make_changes(sandbox)
    expected = view(sandbox)

    result = sandbox.apply()

    assert target.committed() == expected
    assert sandbox.status == "applied"
    paths = [change.path for change in result.changes]
    assert paths == sorted(paths)
    assert Change("items/4", ChangeKind.ADDED) in result.changes
    assert Change("items/2", ChangeKind.DELETED) in result.changes
    assert Change("extra", ChangeKind.ADDED) in result.changes
    assert "committed" in result.summary
    with pytest.raises(CheckpointMissingError, match="committed"):
        sandbox.rollback(ref)
    with pytest.raises(SandboxError, match="applied"):
        sandbox.checkpoint()
    reopened = TransactionRollbackStrategy().open(resource, PLAN, root)
    assert reopened.status == "applied"
    with pytest.raises(CheckpointMissingError, match="committed"):
        reopened.verify(ref)
    # applying again (a resumed Apply of several resources) commits nothing twice
    for again in (sandbox, reopened):
        repeated = again.apply()
        assert repeated.summary.startswith("already committed") and repeated.changes == ()
    assert target.committed() == expected


def test_discard_leaves_the_target_as_it_was(
    sandbox: TransactionRollbackSandbox, target: Target, resource: Resource, root: Path
) -> None:
    seeded = target.committed()
    ref = sandbox.checkpoint()
    make_changes(sandbox)
    assert (root / STATE_FILE_NAME).is_file()

    sandbox.discard()
    sandbox.discard()  # idempotent

    assert target.committed() == seeded
    assert not root.exists()
    assert sandbox.status == "discarded"
    with pytest.raises(CheckpointMissingError):
        sandbox.verify(ref)
    with pytest.raises(SandboxError, match="no database sandbox") as refused:
        TransactionRollbackStrategy().open(resource, PLAN, root)
    assert refused.value.fix == f"agents plan discard {PLAN}, then start the plan again"


def test_diff_read_and_changes_since_baseline(sandbox: TransactionRollbackSandbox) -> None:
    old = sandbox.checkpoint()
    make_changes(sandbox)
    sandbox.execute("UPDATE pairs SET v = 'new' WHERE b = 1")
    new = sandbox.checkpoint()

    diff = sandbox.diff(old, new)

    row_hash_paths = [c for c in diff if c.path.startswith("log/")]
    assert [c.kind for c in row_hash_paths] == [ChangeKind.ADDED]
    assert [c for c in diff if not c.path.startswith("log/")] == [
        Change("extra", ChangeKind.ADDED),
        Change("extra/1", ChangeKind.ADDED),
        Change("extra/2", ChangeKind.ADDED),
        Change("items/1", ChangeKind.MODIFIED),
        Change("items/2", ChangeKind.DELETED),
        Change("items/4", ChangeKind.ADDED),
        Change("notes/2", ChangeKind.MODIFIED),
        Change("pairs/x%2Cy%2Fz,1", ChangeKind.MODIFIED),
    ]
    assert sandbox.diff(new, new) == []
    assert sandbox.changes_since_baseline() == diff  # nothing changed before `old`

    assert json.loads(sandbox.read(old, "items/1") or b"") == {"id": 1, "name": "apple", "qty": 3}
    assert json.loads(sandbox.read(new, "items/1") or b"") == {"id": 1, "name": "apple", "qty": 13}
    assert json.loads(sandbox.read(old, "pairs/x%2Cy%2Fz,1") or b"")["v"] == "odd key"
    assert sandbox.read(old, "items/4") is None
    assert sandbox.read(new, "items/2") is None
    assert sandbox.read(new, "items") is None
    assert sandbox.read(old, "extra/1") is None

    sandbox.rollback(old)
    assert sandbox.changes_since_baseline() == []
    # the snapshot of a checkpoint rolled back over stays readable for comparisons
    assert sandbox.diff(old, new) == diff


def test_a_table_without_primary_key_shows_updates_as_delete_plus_add(
    sandbox: TransactionRollbackSandbox,
) -> None:
    sandbox.execute("UPDATE log SET msg = 'rebooted'")
    changes = sandbox.changes_since_baseline()
    assert sorted(c.kind for c in changes) == [ChangeKind.ADDED, ChangeKind.DELETED]
    assert all(c.path.startswith("log/~") for c in changes)


@pytest.mark.parametrize(
    "call",
    [
        lambda s, bad: s.verify(bad),
        lambda s, bad: s.rollback(bad),
        lambda s, bad: s.diff(bad, bad),
        lambda s, bad: s.read(bad, "items/1"),
        lambda s, bad: s.drop_checkpoint(bad),
    ],
    ids=["verify", "rollback", "diff", "read", "drop_checkpoint"],
)
@pytest.mark.parametrize("bad", ["x; DROP TABLE items", "sp_XYZ", 'sp_0123456789abcdef"; --'])
def test_a_savepoint_name_that_is_not_sp_hex_never_reaches_sql(
    sandbox: TransactionRollbackSandbox,
    call: Callable[[TransactionRollbackSandbox, str], object],
    bad: str,
) -> None:
    ref = sandbox.checkpoint()
    before = view(sandbox)
    statements: list[str] = []

    def record(*args: Any) -> None:
        statements.append(args[2])

    event.listen(Engine, "before_cursor_execute", record)
    try:
        with pytest.raises(UnsafeInputError):
            call(sandbox, bad)
        assert statements == []
        sandbox.rollback(ref)  # control: the listener does see the sandbox's own SQL
        assert any("ROLLBACK TO SAVEPOINT" in statement for statement in statements)
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    assert view(sandbox) == before
    sandbox.verify(ref)


@pytest.mark.parametrize(
    "statement",
    ["COMMIT", "  rollback", "/* sneaky */ END", "-- note\nRELEASE SAVEPOINT x", "begin"],
)
def test_transaction_control_statements_are_refused(
    sandbox: TransactionRollbackSandbox, target: Target, statement: str
) -> None:
    seeded = target.committed()
    ref = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items VALUES (20, 'date', 1)")
    with pytest.raises(SqlStatementError, match="owns its transaction"):
        sandbox.execute(statement)
    assert sandbox.status == "open"
    sandbox.verify(ref)
    assert target.committed() == seeded


def test_a_commit_hidden_in_a_statement_string_is_detected(
    sandbox: TransactionRollbackSandbox, target: Target
) -> None:
    sandbox.checkpoint()
    if target.dialect == "sqlite":  # the driver runs one statement at a time
        with pytest.raises(SqlStatementError, match="one statement"):
            sandbox.execute("INSERT INTO items VALUES (21, 'x', 1); COMMIT")
        assert sandbox.status == "open"
        return
    seeded = target.committed()
    # refused before it runs: its COMMIT would land the plan's rows in the real database
    with pytest.raises(SqlStatementError, match="ends the sandbox's transaction"):
        sandbox.execute("INSERT INTO items VALUES (21, 'x', 1); COMMIT")
    assert sandbox.status == "open" and not sandbox.lost
    assert target.committed() == seeded
    # a statement built as an executable is not read before it runs: detected after
    with pytest.raises(SandboxError, match="ended it") as raised:
        sandbox.execute(text("INSERT INTO items VALUES (21, 'x', 1); COMMIT"))
    assert not isinstance(raised.value, SqlStatementError)
    assert sandbox.lost
    assert "may have been committed" in (sandbox.lost_reason or "")


def test_a_failed_statement_keeps_the_sandbox_usable(
    sandbox: TransactionRollbackSandbox, target: Target
) -> None:
    ref = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items VALUES (30, 'quince', 1)")
    with pytest.raises(SqlStatementError, match="local/target-db"):
        sandbox.execute("INSERT INTO items VALUES (1, 'duplicate', 1)")
    if target.dialect == "postgresql":
        # PostgreSQL aborts the whole transaction until it is rolled back to a savepoint
        with pytest.raises(SandboxError, match="failed after an SQL error"):
            sandbox.checkpoint()
        with pytest.raises(SandboxError, match="would only roll back"):
            sandbox.apply()
        sandbox.rollback(ref)
    sandbox.execute("INSERT INTO items VALUES (31, 'lemon', 1)")
    sandbox.apply()
    ids = [row[0] for row in target.committed()["items"]]
    assert 31 in ids
    assert (30 in ids) is (target.dialect == "sqlite")


def test_drop_checkpoint_forgets_only_that_reference(sandbox: TransactionRollbackSandbox) -> None:
    first = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items VALUES (40, 'a', 1)")
    second = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items VALUES (41, 'b', 1)")
    third = sandbox.checkpoint()
    at_third = view(sandbox)

    sandbox.drop_checkpoint(second)
    sandbox.drop_checkpoint(second)  # idempotent

    assert sandbox.checkpoints == (first, third)
    assert sandbox.savepoints_held == 3
    with pytest.raises(CheckpointMissingError, match="dropped"):
        sandbox.verify(second)
    with pytest.raises(CheckpointMissingError, match="dropped"):
        sandbox.diff(first, second)
    sandbox.execute("DELETE FROM items")
    sandbox.rollback(third)
    assert view(sandbox) == at_third
    sandbox.rollback(first)
    assert list(sandbox.checkpoints) == [first]
    assert [row[0] for row in view(sandbox)["items"]] == [1, 2, 3]


def test_same_process_open_returns_the_live_sandbox(
    sandbox: TransactionRollbackSandbox, resource: Resource, root: Path
) -> None:
    ref = sandbox.checkpoint()
    reopened = TransactionRollbackStrategy().open(resource, PLAN, root)
    assert reopened is sandbox
    reopened.verify(ref)


def test_create_is_refused_while_a_live_sandbox_exists(
    sandbox: TransactionRollbackSandbox, resource: Resource, root: Path
) -> None:
    with pytest.raises(SandboxError, match="already has an open sandbox"):
        TransactionRollbackStrategy().create(resource, PLAN, root)
    sandbox.discard()
    replacement = TransactionRollbackStrategy().create(resource, PLAN, root)
    replacement.discard()


def test_open_refuses_another_plans_sandbox(
    sandbox: TransactionRollbackSandbox, resource: Resource, root: Path
) -> None:
    with pytest.raises(SandboxError, match="belongs to"):
        TransactionRollbackStrategy().open(resource, "01J0000000000000000000OTHR", root)
    assert sandbox.status == "open"


CHILD = """
import json, sys
from pathlib import Path
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.transaction import TransactionRollbackStrategy

location, root, plan = sys.argv[1:4]
resource = Resource(resource_id="local/target-db", kind="database", location=location,
                    sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK)
sandbox = TransactionRollbackStrategy().create(resource, plan, Path(root))
sandbox.execute("INSERT INTO items VALUES (50, 'ghost', 1)")
ref = sandbox.checkpoint()
sandbox.execute("INSERT INTO items VALUES (51, 'ghost', 2)")
print(json.dumps({"ref": ref}))
# the process ends here without apply or discard, as a crash or restart would
"""


def test_a_transaction_left_by_an_ended_process_is_replayed(
    target: Target, resource: Resource, root: Path
) -> None:
    """The process that created the sandbox ends; the next one replays the statement log
    (see test_transaction_replay.py for the details and for a replay that fails)."""
    seeded = target.committed()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, target.location, str(root), PLAN],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    ref = json.loads(child.stdout)["ref"]
    assert target.committed() == seeded  # nothing of the dead transaction landed

    reopened = TransactionRollbackStrategy().open(resource, PLAN, root)
    try:
        assert not reopened.lost
        assert reopened.status == "open"
        assert reopened.lost_reason is None
        assert reopened.checkpoints == (ref,)
        assert [row[0] for row in view(reopened)["items"]] == [1, 2, 3, 50, 51]
        reopened.verify(ref)
        reopened.rollback(ref)
        assert [row[0] for row in view(reopened)["items"]] == [1, 2, 3, 50]
        assert target.committed() == seeded
        reopened.apply()
        assert [row[0] for row in target.committed()["items"]] == [1, 2, 3, 50]
    finally:
        reopened.discard()
    assert not (root / STATE_FILE_NAME).exists()
    fresh = TransactionRollbackStrategy().create(resource, PLAN, root)
    fresh.discard()


def test_a_sandbox_this_process_no_longer_holds_is_lost(
    sandbox: TransactionRollbackSandbox, resource: Resource, root: Path, tmp_path: Path
) -> None:
    ref = sandbox.checkpoint()
    state = json.loads((root / STATE_FILE_NAME).read_text())
    assert state["savepoints"] == [ref]
    assert target_free_of_secrets(state)
    state["token"] = "0" * 32  # as if the process-local registry had been lost
    other_root = tmp_path / "copy"
    other_root.mkdir()
    (other_root / STATE_FILE_NAME).write_text(json.dumps(state))

    orphan = TransactionRollbackStrategy().open(resource, PLAN, other_root)

    assert orphan.lost
    with pytest.raises(CheckpointMissingError, match="no longer holds"):
        orphan.verify(ref)
    sandbox.verify(ref)  # the live one is untouched


def target_free_of_secrets(state: dict[str, Any]) -> bool:
    return "location" not in state and "url" not in state


def test_a_damaged_state_file_is_reported(resource: Resource, root: Path) -> None:
    root.mkdir(parents=True)
    (root / STATE_FILE_NAME).write_text("{not json")
    with pytest.raises(SandboxError, match="damaged"):
        TransactionRollbackStrategy().open(resource, PLAN, root)


def test_without_snapshots_rollback_still_works_and_diff_says_why(
    make_sandbox: Callable[..., TransactionRollbackSandbox], target: Target
) -> None:
    sandbox = make_sandbox(max_snapshot_rows=0)
    before = view(sandbox)
    old = sandbox.checkpoint()
    make_changes(sandbox)
    new = sandbox.checkpoint()
    with pytest.raises(SandboxError, match="snapshots are off"):
        sandbox.diff(old, new)
    with pytest.raises(SandboxError, match="snapshots are off"):
        sandbox.changes_since_baseline()
    sandbox.rollback(old)
    assert view(sandbox) == before
    sandbox.execute("INSERT INTO items VALUES (60, 'melon', 1)")
    assert "not itemised" in sandbox.apply().summary


def test_snapshots_stop_above_the_row_limit(
    make_sandbox: Callable[..., TransactionRollbackSandbox],
) -> None:
    sandbox = make_sandbox(max_snapshot_rows=3)
    ref = sandbox.checkpoint()
    with pytest.raises(SandboxError, match="more than 3 rows"):
        sandbox.read(ref, "items/1")
    sandbox.execute("DELETE FROM items")
    sandbox.rollback(ref)
    assert len(view(sandbox)["items"]) == 3


def test_many_postgres_savepoints_give_a_warning(
    make_sandbox: Callable[..., TransactionRollbackSandbox],
    target: Target,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sandbox = make_sandbox(savepoint_warning_at=3)
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            sandbox.checkpoint()
    if target.dialect == "sqlite":
        assert sandbox.savepoint_warning is None
        assert not caplog.records
        return
    assert "5 savepoints" in (sandbox.savepoint_warning or "")
    assert [r.getMessage() for r in caplog.records if "savepoints" in r.getMessage()] == [
        "the sandbox of local/target-db holds 4 savepoints in one PostgreSQL transaction; "
        "past 3 PostgreSQL overflows its subtransaction cache and every session on the server "
        "slows down: split the plan into child plans, or lower its budget: agents config set "
        "sandbox.checkpoint.max-per-plan 2 --resource local/target-db"
    ]
    sandbox.rollback(sandbox.checkpoints[1])
    assert sandbox.savepoint_warning is None


def test_the_sandbox_can_be_used_from_another_thread(sandbox: TransactionRollbackSandbox) -> None:
    refs: list[str] = []
    worker = threading.Thread(target=lambda: refs.append(sandbox.checkpoint()))
    worker.start()
    worker.join()
    sandbox.execute("DELETE FROM items")
    sandbox.rollback(refs[0])
    assert len(view(sandbox)["items"]) == 3


def test_sqlite_url_form_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "target.db"
    sqlite3.connect(path).close()
    _seed(Target(str(path), f"sqlite:///{path}", "sqlite"))
    sandbox = TransactionRollbackStrategy().create(
        _resource(f"sqlite:///{path}"), PLAN, tmp_path / "root"
    )
    try:
        assert sandbox.dialect == "sqlite"
        assert len(view(sandbox)["items"]) == 3
    finally:
        sandbox.discard()


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("missing.db", "does not exist"),
        ("sqlite://", "not a database file"),
        ("mysql://host/db", "not supported"),
    ],
)
def test_an_unusable_location_is_refused(tmp_path: Path, location: str, message: str) -> None:
    if location == "missing.db":
        location = str(tmp_path / location)
    with pytest.raises(SandboxError, match=message):
        TransactionRollbackStrategy().create(_resource(location), PLAN, tmp_path / "root")
    assert not (tmp_path / "root").exists()


def test_an_unreachable_postgres_server_is_reported(tmp_path: Path) -> None:
    location = f"postgresql://nobody@/nodb?host={tmp_path}&port=1"
    with pytest.raises(SandboxError, match="cannot open a transaction") as raised:
        TransactionRollbackStrategy().create(_resource(location), PLAN, tmp_path / "root")
    assert "check the resource location" in str(raised.value)
    assert not (tmp_path / "root" / STATE_FILE_NAME).exists()


@pytest.mark.postgres
def test_postgres_schemas_and_unreadable_tables(postgres_url: str, tmp_path: Path) -> None:
    """Other schemas are prefixed; a table the login may not read is skipped, because one
    refused SELECT would abort the sandbox's whole transaction."""
    target = _seed(Target(postgres_url, postgres_url, "postgresql"))
    role = f"limited_{tmp_path.name[-8:].lower().replace('-', '_')}"
    admin = target.engine()
    with admin.begin() as connection:
        connection.execute(text("CREATE SCHEMA other"))
        connection.execute(text("CREATE TABLE other.things (id INTEGER PRIMARY KEY)"))
        connection.execute(text("CREATE TABLE secret (id INTEGER PRIMARY KEY)"))
        connection.execute(text("INSERT INTO secret VALUES (1)"))
        connection.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        connection.execute(text(f'GRANT USAGE ON SCHEMA other TO "{role}"'))
        connection.execute(text(f'GRANT SELECT, INSERT ON items, other.things TO "{role}"'))
    limited = postgres_url.replace("postgres@", f"{role}@", 1)
    try:
        sandbox = TransactionRollbackStrategy().create(_resource(limited), PLAN, tmp_path / "r")
        try:
            ref = sandbox.checkpoint()
            sandbox.execute("INSERT INTO other.things VALUES (7)")
            sandbox.execute("INSERT INTO items VALUES (8, 'grape', 1)")
            assert sandbox.changes_since_baseline() == [
                Change("items/8", ChangeKind.ADDED),
                Change("other.things/7", ChangeKind.ADDED),
            ]
            assert sandbox.read(ref, "secret/1") is None  # never read
            sandbox.rollback(ref)
            assert sandbox.changes_since_baseline() == []
        finally:
            sandbox.discard()
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP OWNED BY "{role}"'))
            connection.execute(text(f'DROP ROLE "{role}"'))
        admin.dispose()


@pytest.mark.postgres
def test_a_dropped_connection_is_reported_as_lost(postgres_url: str, tmp_path: Path) -> None:
    target = _seed(Target(postgres_url, postgres_url, "postgresql"))
    sandbox = TransactionRollbackStrategy().create(_resource(postgres_url), PLAN, tmp_path / "r")
    try:
        ref = sandbox.checkpoint()
        sandbox.execute("INSERT INTO items VALUES (70, 'gone', 1)")
        admin = target.engine()
        with admin.begin() as connection:
            ended = connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    "datname = current_database() AND application_name LIKE 'cleveragents%'"
                )
            ).all()
        admin.dispose()
        assert ended == [(True,)]

        with pytest.raises(CheckpointMissingError, match="connection dropped") as raised:
            sandbox.verify(ref)
        assert "--mode=append" in str(raised.value)
        assert sandbox.lost
        with pytest.raises(CheckpointMissingError, match="connection dropped"):
            sandbox.rollback(ref)
        assert 70 not in [row[0] for row in target.committed()["items"]]
    finally:
        sandbox.discard()
