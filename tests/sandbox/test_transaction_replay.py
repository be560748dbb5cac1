"""Replaying a transaction_rollback sandbox in a later process, on SQLite and PostgreSQL.

Each ``agents`` command runs in its own process, so the process that ran Execute has ended
when Apply or a correction runs. A child process here creates the sandbox and ends; the test
process opens it again and must find it live, replayed from the statement log.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import ChangeKind, CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.transaction import (
    TransactionRollbackSandbox,
    TransactionRollbackStrategy,
)
from cleveragents_tui.sandbox.transaction.state import STATE_FILE_NAME, State
from cleveragents_tui.sandbox.transaction.statement_log import LOG_FILE_NAME
from tests.sandbox.test_transaction_rollback import PLAN, REPO, Target, _resource, _seed, view

# Runs a list of operations on a sandbox and prints what it saw as JSON, then ends without
# apply or discard, as the `agents` process that ran Execute does.
RUNNER = r"""
import json, sys
from pathlib import Path
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.transaction import (
    SqlStatementError,
    TransactionRollbackStrategy,
)

location, root, plan = sys.argv[1:4]
operations = json.loads(sys.argv[4])
resource = Resource(resource_id="local/target-db", kind="database", location=location,
                    sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK)
strategy = TransactionRollbackStrategy()
seen = {"refs": [], "views": [], "lost_reason": None}

def view(sandbox):
    tables = sandbox.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        if sandbox.dialect == "sqlite"
        else "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
    )
    return {
        table: [list(row) for row in sandbox.execute(f"SELECT * FROM {table} ORDER BY 1")]
        for (table,) in tables.all()
    }

sandbox = None
for operation, *arguments in operations:
    if operation == "create":
        sandbox = strategy.create(resource, plan, Path(root))
    elif operation == "open":
        sandbox = strategy.open(resource, plan, Path(root))
        seen["lost_reason"] = sandbox.lost_reason
        seen["status"] = sandbox.status
        if sandbox.lost:
            break
    elif operation == "exec":
        sandbox.execute(*arguments)
    elif operation == "exec-failing":
        try:
            sandbox.execute(*arguments)
        except SqlStatementError as exc:
            seen["errors"] = seen.get("errors", []) + [exc.problem]
        else:
            raise SystemExit("the statement should have failed")
    elif operation == "exec-bytes":
        sandbox.execute(arguments[0], {"data": bytes.fromhex(arguments[1])})
    elif operation == "exec-bytes-many":  # a list of mappings: bytes there are not logged
        sandbox.execute(arguments[0], [{"data": bytes.fromhex(arguments[1])}])
    elif operation == "apply":
        sandbox.apply()
    elif operation == "checkpoint":
        seen["refs"].append(sandbox.checkpoint())
    elif operation == "rollback":
        sandbox.rollback(arguments[0])
    elif operation == "view":
        seen["views"].append(view(sandbox))
    elif operation == "try-view":
        try:
            seen["views"].append(view(sandbox))
        except SandboxError as exc:
            seen["errors"] = seen.get("errors", []) + [str(exc)]
print(json.dumps(seen))
"""

Rows = dict[str, list[list[Any]]]


def run_process(target: Target, root: Path, *operations: list[Any]) -> dict[str, Any]:
    """Run ``operations`` in a new Python process that then ends, and return what it saw."""
    child = subprocess.run(
        [sys.executable, "-c", RUNNER, target.location, str(root), PLAN, json.dumps(operations)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    result: dict[str, Any] = json.loads(child.stdout)
    return result


def as_json(rows: dict[str, list[tuple[Any, ...]]]) -> Rows:
    return {table: [list(row) for row in values] for table, values in rows.items()}


def log_lines(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / LOG_FILE_NAME).read_text().splitlines()]


def status_now(sandbox: TransactionRollbackSandbox) -> str:
    """``sandbox.status`` as declared: after an assert on it, mypy keeps the value asserted
    even across a call (apply, rollback) that changes it."""
    return sandbox.status


def checkpoints_now(sandbox: TransactionRollbackSandbox) -> tuple[str, ...]:
    """``sandbox.checkpoints`` as declared (see status_now)."""
    return sandbox.checkpoints


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "sqlite":
        path = tmp_path / "target.db"
        sqlite3.connect(path).close()
        return _seed(Target(str(path), f"sqlite:///{path}", "sqlite"))
    url = str(request.getfixturevalue("postgres_url"))
    return _seed(Target(url, url, "postgresql"))


@pytest.fixture
def sqlite_target(tmp_path: Path) -> Target:
    path = tmp_path / "target.db"
    sqlite3.connect(path).close()
    return _seed(Target(str(path), f"sqlite:///{path}", "sqlite"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sandboxes" / "target-db"


@pytest.fixture
def opened() -> Iterator[list[TransactionRollbackSandbox]]:
    """Sandboxes a test opens; discarded at teardown, so no connection outlives a test."""
    sandboxes: list[TransactionRollbackSandbox] = []
    yield sandboxes
    for sandbox in sandboxes:
        sandbox.discard()


@pytest.fixture
def reopen(
    root: Path, opened: list[TransactionRollbackSandbox]
) -> Callable[[Target], TransactionRollbackSandbox]:
    def do(target: Target) -> TransactionRollbackSandbox:
        sandbox = TransactionRollbackStrategy().open(_resource(target.location), PLAN, root)
        opened.append(sandbox)
        return sandbox

    return do


def committed_execute_rows(target: Target) -> Rows:
    return as_json(target.committed())


def run_sql(target: Target, *statements: str) -> None:
    """Change the target outside any sandbox (another client, committed)."""
    engine = target.engine()
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(text(statement))
    finally:
        engine.dispose()


EXECUTE: list[list[Any]] = [
    ["create"],
    ["exec", "INSERT INTO items VALUES (:id, :name, :qty)", {"id": 50, "name": "fig", "qty": 1}],
    ["checkpoint"],
    ["view"],
    ["exec", "UPDATE items SET qty = qty + 10 WHERE id = 1"],
    ["exec", "DELETE FROM items WHERE id = 2"],
    ["exec", "CREATE TABLE extra (id INTEGER PRIMARY KEY, tag TEXT)"],
    [
        "exec",
        "INSERT INTO extra VALUES (:id, :tag)",
        [{"id": 1, "tag": "a"}, {"id": 2, "tag": "b"}],
    ],
    ["checkpoint"],
    ["view"],
    ["exec", "DELETE FROM notes WHERE id = :id", {"id": 1}],
    ["view"],
]


def test_a_sandbox_is_replayed_after_its_process_ended(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    seeded = committed_execute_rows(target)
    child = run_process(target, root, *EXECUTE)
    first, second = child["refs"]
    at_first, at_second, at_end = child["views"]
    assert committed_execute_rows(target) == seeded  # the ended transaction left nothing

    sandbox = reopen(target)

    assert not sandbox.lost
    assert sandbox.status == "open"
    assert sandbox.lost_reason is None
    assert sandbox.unreplayable_reason is None
    assert sandbox.checkpoints == (first, second)
    assert as_json(view(sandbox)) == at_end
    assert committed_execute_rows(target) == seeded  # replayed inside the new transaction
    sandbox.verify(first)
    sandbox.verify(second)
    # the row snapshots were rebuilt while replaying
    assert json.loads(sandbox.read(first, "items/50") or b"")["name"] == "fig"
    diff = sandbox.diff(first, second)
    assert ("extra/1", ChangeKind.ADDED) in [(c.path, c.kind) for c in diff]
    assert ("items/2", ChangeKind.DELETED) in [(c.path, c.kind) for c in diff]

    sandbox.rollback(first)

    assert as_json(view(sandbox)) == at_first
    assert checkpoints_now(sandbox) == (first,)
    with pytest.raises(CheckpointMissingError, match="rolled back"):
        sandbox.verify(second)
    lines = log_lines(root)
    assert [entry["savepoint"] for entry in lines if "savepoint" in entry] == [first]
    after_first = lines[[entry.get("savepoint") for entry in lines].index(first) + 1 :]
    assert all(entry["sql"].startswith("SELECT") for entry in after_first)  # PostgreSQL logs reads

    result = sandbox.apply()

    assert committed_execute_rows(target) == at_first  # another connection sees exactly these
    assert at_first != at_second
    assert "committed" in result.summary
    assert status_now(sandbox) == "applied"
    assert not (root / LOG_FILE_NAME).exists()
    reopened = reopen(target)
    assert reopened.status == "applied"


def test_a_correction_in_one_process_is_replayed_by_the_next(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    seeded = committed_execute_rows(target)
    insert = "INSERT INTO items VALUES (:id, 'x', 1)"
    execute = run_process(
        target,
        root,
        ["create"],
        ["exec", insert, {"id": 50}],
        ["checkpoint"],
        ["exec", insert, {"id": 51}],
        ["checkpoint"],
        ["exec", insert, {"id": 52}],
    )
    first, second = execute["refs"]
    correction = run_process(
        target,
        root,
        ["open"],
        ["rollback", first],
        ["exec", insert, {"id": 53}],
        ["checkpoint"],
        ["view"],
    )
    assert correction["lost_reason"] is None
    (third,) = correction["refs"]

    sandbox = reopen(target)

    assert not sandbox.lost
    assert sandbox.checkpoints == (first, third)
    assert as_json(view(sandbox)) == correction["views"][0]
    assert [row[0] for row in view(sandbox)["items"]] == [1, 2, 3, 50, 53]
    with pytest.raises(CheckpointMissingError):
        sandbox.verify(second)
    assert committed_execute_rows(target) == seeded
    sandbox.apply()
    assert [row[0] for row in target.committed()["items"]] == [1, 2, 3, 50, 53]


def test_a_sandbox_held_by_a_running_process_is_not_replayed(
    target: Target, root: Path, opened: list[TransactionRollbackSandbox]
) -> None:
    sandbox = TransactionRollbackStrategy().create(_resource(target.location), PLAN, root)
    opened.append(sandbox)
    ref = sandbox.checkpoint()
    sandbox.execute("INSERT INTO items VALUES (50, 'mine', 1)")

    other = run_process(target, root, ["open"], ["try-view"])

    # not lost: released there, and each use tries again (transaction_handover.py)
    assert other["status"] == "released"
    assert other["views"] == []
    assert "is held by process" in other["errors"][0]
    with pytest.raises(SandboxError, match="already has an open sandbox"):
        TransactionRollbackStrategy().create(_resource(target.location), PLAN, root)
    sandbox.verify(ref)
    assert 50 in [row[0] for row in view(sandbox)["items"]]


def test_a_replay_that_fails_reports_lost_and_changes_nothing(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    child = run_process(
        target,
        root,
        ["create"],
        ["exec", "INSERT INTO items VALUES (50, 'fig', 1)"],
        ["checkpoint"],
        ["exec", "INSERT INTO notes VALUES (3, 'third')"],
    )
    (ref,) = child["refs"]
    run_sql(target, "DROP TABLE notes")  # the target changed after Execute
    before = committed_execute_rows(target)

    sandbox = reopen(target)

    assert sandbox.lost
    reason = sandbox.lost_reason or ""
    assert "lost on restart" in reason
    # the rows at the savepoint already differ (the notes table is gone): caught there
    assert f"the rows at savepoint {ref} differ from the first run" in reason
    for action in (sandbox.verify, sandbox.rollback):
        with pytest.raises(CheckpointMissingError, match="differ from the first run") as raised:
            action(ref)
        assert "--mode=append" in str(raised.value)
    with pytest.raises(SandboxError, match="differ from the first run"):
        sandbox.apply()
    with pytest.raises(SandboxError, match="differ from the first run"):
        sandbox.checkpoint()
    assert committed_execute_rows(target) == before  # item 50 was rolled back with the replay
    assert 50 not in [row[0] for row in target.committed()["items"]]

    sandbox.discard()
    assert not root.exists()


def test_a_statement_that_changes_other_rows_on_replay_fails_it(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    run_process(target, root, ["create"], ["exec", "UPDATE items SET qty = 0 WHERE id = 1"])
    run_sql(target, "DELETE FROM items WHERE id = 1")

    sandbox = reopen(target)

    assert sandbox.lost
    assert "changed 0 rows where it changed 1 the first time" in (sandbox.lost_reason or "")


def test_a_statement_that_fails_on_replay_is_named(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    run_process(target, root, ["create"], ["exec", "INSERT INTO notes VALUES (3, 'third')"])
    run_sql(target, "DROP TABLE notes")

    sandbox = reopen(target)

    reason = sandbox.lost_reason or ""
    assert sandbox.lost
    assert "replaying statement 1 of 1 (INSERT INTO notes VALUES (3, 'third')) failed" in reason
    assert "notes" in reason.rsplit("failed:", 1)[1]


def test_rows_changed_by_someone_else_fail_the_replay_at_the_savepoint(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    run_process(
        target, root, ["create"], ["exec", "UPDATE items SET qty = 7 WHERE id = 1"], ["checkpoint"]
    )
    run_sql(target, "UPDATE items SET name = 'changed' WHERE id = 2")  # same row counts
    theirs = committed_execute_rows(target)

    sandbox = reopen(target)

    assert sandbox.lost
    assert "rows at savepoint sp_" in (sandbox.lost_reason or "")
    assert "differ from the first run" in (sandbox.lost_reason or "")
    assert committed_execute_rows(target) == theirs  # the failed replay was rolled back


def test_values_json_cannot_carry_make_the_log_unreplayable(
    sqlite_target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    seeded = committed_execute_rows(sqlite_target)
    run_process(
        sqlite_target,
        root,
        ["create"],
        ["exec", "INSERT INTO items VALUES (50, 'fig', 1)"],
        ["checkpoint"],
        ["exec-bytes-many", "INSERT INTO notes VALUES (3, :data)", "00ff"],
    )

    sandbox = reopen(sqlite_target)

    assert sandbox.lost
    reason = sandbox.lost_reason or ""
    assert "cannot be replayed" in reason
    assert "JSON cannot carry" in reason
    assert "INSERT INTO notes" in reason
    assert committed_execute_rows(sqlite_target) == seeded


def test_bytes_parameters_are_logged_as_base64_and_replay_as_bytes(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    blob = bytes(range(256)) + b"\x00"
    kind = "BLOB" if target.dialect == "sqlite" else "BYTEA"
    run_process(
        target,
        root,
        ["create"],
        ["exec", f"CREATE TABLE blobs (id INTEGER PRIMARY KEY, data {kind})"],
        ["exec-bytes", "INSERT INTO blobs VALUES (3, :data)", blob.hex()],
        ["checkpoint"],
    )
    entry = log_lines(root)[1]
    assert entry["bytes"] == ["data"]
    assert entry["params"] == {"data": base64.b64encode(blob).decode()}

    sandbox = reopen(target)  # another process: the log is replayed

    assert not sandbox.lost, sandbox.lost_reason
    (row,) = sandbox.execute("SELECT data FROM blobs WHERE id = 3").all()
    assert bytes(row[0]) == blob


def test_a_rollback_over_an_unloggable_statement_makes_the_log_replayable(
    sqlite_target: Target,
    root: Path,
    opened: list[TransactionRollbackSandbox],
    reopen: Callable[[Target], TransactionRollbackSandbox],
) -> None:
    sandbox = TransactionRollbackStrategy().create(_resource(sqlite_target.location), PLAN, root)
    opened.append(sandbox)
    sandbox.execute("INSERT INTO items VALUES (50, 'fig', 1)")
    ref = sandbox.checkpoint()
    sandbox.execute("INSERT INTO notes VALUES (3, :data)", [{"data": b"\x00\xff"}])
    assert "JSON cannot carry" in (sandbox.unreplayable_reason or "")
    sandbox.rollback(ref)
    assert sandbox.unreplayable_reason is None
    assert [sorted(entry) for entry in log_lines(root)] == [
        ["after", "params", "rowcount", "sql"],
        ["rows", "savepoint"],
    ]


def test_the_log_is_private_and_holds_what_replay_needs(
    target: Target, root: Path, opened: list[TransactionRollbackSandbox]
) -> None:
    sandbox = TransactionRollbackStrategy().create(_resource(target.location), PLAN, root)
    opened.append(sandbox)
    log = root / LOG_FILE_NAME
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert log.read_text() == ""

    sandbox.execute("SELECT count(*) FROM items").all()
    sandbox.execute("INSERT INTO items VALUES (:id, :name, 1)", {"id": 50, "name": "fig"})
    ref = sandbox.checkpoint()
    sandbox.execute("DELETE FROM items WHERE id IN (1, 2)")

    lines = log_lines(root)
    if target.dialect == "postgresql":  # a SELECT may call a function that writes
        assert lines[0] == {"sql": "SELECT count(*) FROM items", "params": None, "after": -1}
        lines = lines[1:]
    rows = lines[1].get("rows", "")
    assert len(rows) == 64 and int(rows, 16) >= 0  # the digest of the rows at the savepoint
    assert lines == [
        {
            "sql": "INSERT INTO items VALUES (:id, :name, 1)",
            "params": {"id": 50, "name": "fig"},
            "after": -1,
            "rowcount": 1,
        },
        {"savepoint": ref, "rows": rows},
        {"sql": "DELETE FROM items WHERE id IN (1, 2)", "params": None, "after": 0, "rowcount": 2},
    ]
    sandbox.rollback(ref)
    assert log_lines(root)[-1] == {"savepoint": ref, "rows": rows}
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert "url" not in json.loads((root / STATE_FILE_NAME).read_text())


def test_a_process_that_ended_while_committing_is_not_replayed(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    run_process(target, root, ["create"], ["exec", "INSERT INTO items VALUES (50, 'fig', 1)"])
    state = json.loads((root / STATE_FILE_NAME).read_text())
    state["status"] = "applying"  # as if the process ended inside COMMIT
    (root / STATE_FILE_NAME).write_text(json.dumps(state))

    sandbox = reopen(target)

    assert sandbox.lost
    assert "while committing it" in (sandbox.lost_reason or "")
    assert 50 not in [row[0] for row in target.committed()["items"]]


def test_a_transaction_control_statement_in_the_log_is_refused_on_replay(
    target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    seeded = committed_execute_rows(target)
    run_process(target, root, ["create"], ["exec", "INSERT INTO items VALUES (50, 'fig', 1)"])
    with (root / LOG_FILE_NAME).open("a") as log:  # a tampered log
        log.write(json.dumps({"sql": "COMMIT", "params": None, "after": -1}) + "\n")

    sandbox = reopen(target)

    assert sandbox.lost
    assert "statement 'COMMIT' refused" in (sandbox.lost_reason or "")
    assert committed_execute_rows(target) == seeded


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"savepoint": "sp_1; DROP TABLE items"}', "damaged"),
        ('{"sql": "DELETE FROM items", "params": null, "after": 3}', "damaged"),
        ("not json", "damaged"),
    ],
)
def test_a_damaged_log_is_not_replayed(
    sqlite_target: Target,
    root: Path,
    reopen: Callable[[Target], TransactionRollbackSandbox],
    line: str,
    message: str,
) -> None:
    seeded = committed_execute_rows(sqlite_target)
    run_process(sqlite_target, root, ["create"])
    (root / LOG_FILE_NAME).write_text(line + "\n")

    sandbox = reopen(sqlite_target)

    assert sandbox.lost
    assert message in (sandbox.lost_reason or "")
    assert committed_execute_rows(sqlite_target) == seeded


def test_a_cut_short_last_line_is_left_out(
    sqlite_target: Target, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    run_process(
        sqlite_target, root, ["create"], ["exec", "INSERT INTO items VALUES (50, 'fig', 1)"]
    )
    with (root / LOG_FILE_NAME).open("a") as log:  # the process ended mid-append
        log.write('{"sql": "DELETE FROM ite')

    sandbox = reopen(sqlite_target)

    assert not sandbox.lost
    assert [row[0] for row in view(sandbox)["items"]] == [1, 2, 3, 50]


@pytest.mark.postgres
def test_a_transaction_ended_by_a_statement_is_never_replayed(
    postgres_url: str, root: Path
) -> None:
    target = _seed(Target(postgres_url, postgres_url, "postgresql"))
    resource: Resource = _resource(postgres_url)
    sandbox = TransactionRollbackStrategy().create(resource, PLAN, root)
    try:
        with pytest.raises(SandboxError, match="ended it"):  # an executable: not read first
            sandbox.execute(text("INSERT INTO items VALUES (21, 'x', 1); COMMIT"))
        state = json.loads((root / STATE_FILE_NAME).read_text())
        assert "ended it" in state["unreplayable"]
        assert sandbox.unreplayable_reason == state["unreplayable"]
    finally:
        sandbox.discard()
    assert 21 in [row[0] for row in target.committed()["items"]]


@pytest.mark.postgres
def test_a_failed_postgres_transaction_is_still_failed_after_replay(
    postgres_url: str, root: Path, reopen: Callable[[Target], TransactionRollbackSandbox]
) -> None:
    target = _seed(Target(postgres_url, postgres_url, "postgresql"))
    child = run_process(
        target,
        root,
        ["create"],
        ["exec", "INSERT INTO items VALUES (50, 'fig', 1)"],
        ["checkpoint"],
        ["exec", "INSERT INTO items VALUES (51, 'kiwi', 1)"],
        ["exec-failing", "INSERT INTO items VALUES (1, 'duplicate', 1)"],
    )
    assert len(child["errors"]) == 1
    (ref,) = child["refs"]

    sandbox = reopen(target)

    assert not sandbox.lost
    with pytest.raises(SandboxError, match="would only roll back"):
        sandbox.apply()
    with pytest.raises(SandboxError, match="failed after an SQL error"):
        sandbox.checkpoint()
    sandbox.rollback(ref)
    assert "failed" not in json.dumps(log_lines(root))
    sandbox.apply()
    assert [row[0] for row in target.committed()["items"]] == [1, 2, 3, 50]


def test_a_sandbox_applied_while_this_process_waited_is_not_replayed(
    sqlite_target: Target, root: Path, opened: list[TransactionRollbackSandbox]
) -> None:
    """This process read the state before another one applied the sandbox: the state read
    again under the lock wins, so the changes are not replayed (and committed) twice."""
    run_process(sqlite_target, root, ["create"], ["exec", "INSERT INTO items VALUES (50, 'x', 1)"])
    stale = State.load(root / STATE_FILE_NAME, PLAN)
    assert stale is not None
    run_process(sqlite_target, root, ["open"], ["apply"])
    resource = _resource(sqlite_target.location)
    sandbox = TransactionRollbackStrategy()._sandbox(resource, PLAN, root, stale)
    opened.append(sandbox)

    sandbox._reopen(dataclasses.replace(stale))

    assert sandbox.status == "applied"
    assert [row[0] for row in sqlite_target.committed()["items"]] == [1, 2, 3, 50]
