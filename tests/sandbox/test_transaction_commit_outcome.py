"""A PostgreSQL Apply killed at its COMMIT is decided exactly (issue 21, item 2).

The sandbox records the transaction's id (``txid_current()``) with ``applying`` before
COMMIT; the next process asks the server (``pg_xact_status``). Before, a process killed
there left the sandbox lost ("whether the changes reached the database is unknown"): a
rerun of Apply was refused and the plan stayed constrained, whichever way COMMIT went.

The kill is a real SIGKILL at the ``transaction.commit`` failpoint in a child process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.failpoints import ENV_VAR
from cleveragents_tui.sandbox import pg_commit
from cleveragents_tui.sandbox.transaction import TransactionRollbackStrategy
from cleveragents_tui.sandbox.transaction.state import STATE_FILE_NAME

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[2]
PLAN = "01J0000000000000000000PLAN"
CHILD = """
import sys
from pathlib import Path
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.transaction import TransactionRollbackStrategy

location, root, plan = sys.argv[1:4]
resource = Resource(resource_id="local/target-db", kind="database", location=location,
                    sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK)
sandbox = TransactionRollbackStrategy().create(resource, plan, Path(root))
sandbox.execute("INSERT INTO items VALUES (2, 'two')")
sandbox.checkpoint()
sandbox.execute("UPDATE items SET name = 'one, changed' WHERE id = 1")
sandbox.apply()  # killed at the failpoint
"""


def _rows(url: str) -> list[tuple[object, ...]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            return [tuple(r) for r in connection.execute(text("SELECT * FROM items ORDER BY 1"))]
    finally:
        engine.dispose()


@pytest.fixture
def target(postgres_url: str) -> str:
    engine = create_engine(postgres_url, poolclass=NullPool)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE items (id integer PRIMARY KEY, name text)"))
        connection.execute(text("INSERT INTO items VALUES (1, 'one')"))
    engine.dispose()
    return postgres_url


def _killed_applying(target: str, root: Path, failpoint: str) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, target, str(root), PLAN],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != ENV_VAR}, ENV_VAR: failpoint},
        check=False,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    state = json.loads((root / STATE_FILE_NAME).read_text("utf-8"))
    assert state["status"] == "applying" and isinstance(state["commit_txid"], int), state


RESULT = [(1, "one, changed"), (2, "two")]


def test_killed_after_commit_the_sandbox_is_applied_and_apply_goes_on(
    target: str, tmp_path: Path
) -> None:
    root = tmp_path / "sandbox"
    _killed_applying(target, root, "transaction.commit@committed=kill")
    assert _rows(target) == RESULT  # the COMMIT took effect before the kill

    resource = _resource(target)
    sandbox = TransactionRollbackStrategy().open(resource, PLAN, root)
    assert sandbox.status == "applied", sandbox.lost_reason
    assert "already committed" in sandbox.apply().summary
    assert _rows(target) == RESULT  # once, not twice
    sandbox.discard()


def test_killed_before_commit_the_log_is_replayed_and_apply_lands_it(
    target: str, tmp_path: Path
) -> None:
    root = tmp_path / "sandbox"
    _killed_applying(target, root, "transaction.commit@commit=kill")
    assert _rows(target) == [(1, "one")]  # the server rolled the transaction back

    sandbox = TransactionRollbackStrategy().open(_resource(target), PLAN, root)
    try:
        assert sandbox.status == "open", sandbox.lost_reason
        assert "committed the sandbox transaction" in sandbox.apply().summary
        assert _rows(target) == RESULT
    finally:
        sandbox.discard()


def test_a_transaction_still_in_progress_on_an_orphaned_backend_is_ended_then_decided(
    target: str,
) -> None:
    """The dead process's backend may not yet have noticed: its transaction is then still
    in progress; it is ended (nothing else can hold it) and reads aborted."""
    engine = create_engine(target, poolclass=NullPool)
    orphan = engine.connect()
    try:
        orphan.begin()
        orphan.execute(text("INSERT INTO items VALUES (9, 'orphan')"))
        txid = pg_commit.transaction_id(orphan)

        assert pg_commit.outcome(make_url(target), txid) == "aborted"
    finally:
        orphan.invalidate()  # its backend was terminated
        engine.dispose()
    assert _rows(target) == [(1, "one")]


def _resource(location: str) -> Resource:
    return Resource(
        resource_id="local/target-db",
        kind="database",
        location=location,
        sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK,
    )
