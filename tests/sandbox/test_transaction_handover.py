"""Handing a transaction_rollback sandbox over between live processes (transaction_handover.py).

The process that ran a plan stays open (an app window, a browser tab) while another one
corrects it. The holder hands its sandbox over when it is done with it; the other process
takes it by replaying the statement log, rolls it back and goes on; the first process, still
alive, then takes it back as the other left it — never its own earlier transaction.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import sqlite3
from collections.abc import Iterator
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from cleveragents_tui.sandbox import transaction_handover
from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.transaction import (
    TransactionRollbackSandbox,
    TransactionRollbackStrategy,
)
from cleveragents_tui.sandbox.transaction.state import LOCK_FILE_NAME
from tests.sandbox.test_transaction_replay import as_json, run_process
from tests.sandbox.test_transaction_rollback import PLAN, Target, _resource, _seed, view

INSERT = "INSERT INTO items VALUES (:id, 'x', 1)"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "sqlite":
        path = tmp_path / "target.db"
        sqlite3.connect(path).close()
        return _seed(Target(str(path), f"sqlite:///{path}", "sqlite"))
    url = str(request.getfixturevalue("postgres_url"))
    return _seed(Target(url, url, "postgresql"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sandboxes" / PLAN / "local__target-db"


@pytest.fixture
def sandbox(target: Target, root: Path) -> Iterator[TransactionRollbackSandbox]:
    made = TransactionRollbackStrategy().create(_resource(target.location), PLAN, root)
    yield made
    made.discard()


def ids(rows: dict[str, list[tuple[object, ...]]]) -> list[object]:
    return [row[0] for row in rows["items"]]


def sqlite_writable(target: Target) -> bool:
    """Whether another client could take the SQLite file's write lock now."""
    connection = sqlite3.connect(target.location, timeout=0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()


def test_another_process_corrects_a_handed_over_sandbox_and_the_first_sees_it(
    target: Target, root: Path, sandbox: TransactionRollbackSandbox
) -> None:
    seeded = ids(target.committed())
    sandbox.execute(INSERT, {"id": 50})
    first = sandbox.checkpoint()
    sandbox.execute(INSERT, {"id": 51})
    second = sandbox.checkpoint()
    sandbox.execute(INSERT, {"id": 52})
    if target.dialect == "sqlite":
        assert not sqlite_writable(target)  # BEGIN IMMEDIATE: the holder has the write lock

    assert sandbox.hand_over()

    assert sandbox.status == "released"
    assert not sandbox.held
    assert ids(target.committed()) == seeded  # nothing was committed by letting go
    if target.dialect == "sqlite":
        assert sqlite_writable(target)
    correction = run_process(
        target,
        root,
        ["open"],
        ["rollback", first],
        ["exec", INSERT, {"id": 53}],
        ["checkpoint"],
        ["view"],
    )
    assert correction["status"] == "open" and correction["lost_reason"] is None
    (third,) = correction["refs"]

    # the first process, still alive, uses the object it had: it replays the other's log
    assert ids(view(sandbox)) == [*seeded, 50, 53]
    assert as_json(view(sandbox)) == correction["views"][0]
    assert sandbox.checkpoints == (first, third)
    with pytest.raises(CheckpointMissingError, match="rolled back or dropped by another process"):
        sandbox.verify(second)
    sandbox.apply()
    assert ids(target.committed()) == [*seeded, 50, 53]


def test_taken_back_by_its_own_process_it_keeps_the_snapshots_of_rolled_back_checkpoints(
    target: Target, sandbox: TransactionRollbackSandbox
) -> None:
    sandbox.execute(INSERT, {"id": 50})
    first = sandbox.checkpoint()
    sandbox.execute(INSERT, {"id": 51})
    safety = sandbox.checkpoint()
    sandbox.rollback(first)

    assert sandbox.hand_over()

    assert [change.path for change in sandbox.diff(first, safety)] == ["items/51"]
    assert sandbox.held  # the diff took it back
    assert sandbox.checkpoints == (first,)
    assert ids(view(sandbox))[-1] == 50


def test_a_log_that_cannot_be_replayed_is_kept_held(target: Target, root: Path) -> None:
    if target.dialect != "sqlite":
        pytest.skip("the unloggable value is the same on both; one database is enough")
    sandbox = TransactionRollbackStrategy().create(_resource(target.location), PLAN, root)
    try:
        sandbox.execute(INSERT, {"id": 50})
        ref = sandbox.checkpoint()
        sandbox.execute("INSERT INTO notes VALUES (3, :data)", [{"data": b"\x00\xff"}])

        assert not sandbox.hand_over()  # the open transaction is the only copy of the bytes

        assert sandbox.held
        other = run_process(target, root, ["open"], ["try-view"])
        assert "is held by process" in other["errors"][0]
        sandbox.rollback(ref)  # cuts the unloggable statement off: replayable again
        assert sandbox.hand_over()
        assert ids(run_process(target, root, ["open"], ["view"])["views"][0])[-1] == 50
    finally:
        sandbox.discard()


def test_a_pin_keeps_the_sandbox_held_and_its_end_hands_it_over(target: Target, root: Path) -> None:
    plan_folder = root.parent
    with transaction_handover.pinned(plan_folder):
        sandbox = TransactionRollbackStrategy().create(_resource(target.location), PLAN, root)
        try:
            sandbox.execute(INSERT, {"id": 50})
            with transaction_handover.pinned(plan_folder):  # a nested pin (a replay) ends
                sandbox.checkpoint()
            assert sandbox.held
        except BaseException:
            sandbox.discard()
            raise
    try:
        assert sandbox.status == "released"
        assert TransactionRollbackStrategy().open(_resource(target.location), PLAN, root) is (
            sandbox
        )  # one object per sandbox in a process
        assert ids(run_process(target, root, ["open"], ["view"])["views"][0])[-1] == 50
    finally:
        sandbox.discard()


def _hold_a_copy(ready: Event, done: Event) -> None:
    ready.set()
    done.wait(60)


def test_a_forked_child_does_not_keep_the_sandbox_held(
    target: Target, root: Path, sandbox: TransactionRollbackSandbox
) -> None:
    sandbox.execute(INSERT, {"id": 50})
    context = multiprocessing.get_context("fork")
    ready, done = context.Event(), context.Event()
    child = context.Process(target=_hold_a_copy, args=(ready, done))
    child.start()
    try:
        assert ready.wait(60)
        assert sandbox.hand_over()  # the child's copy of the lock must not keep it held
        seen = run_process(target, root, ["open"], ["try-view"])
        assert "errors" not in seen, seen.get("errors")
        assert ids(seen["views"][0])[-1] == 50
    finally:
        done.set()
        child.join(60)


def test_a_sandbox_another_process_holds_says_so_and_is_tried_again(
    target: Target, root: Path
) -> None:
    run_process(target, root, ["create"], ["exec", INSERT, {"id": 50}])
    fd = os.open(root / LOCK_FILE_NAME, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as another live process holding it would
    try:
        sandbox = TransactionRollbackStrategy().open(_resource(target.location), PLAN, root)
        assert sandbox.status == "released"
        assert not sandbox.lost
        with pytest.raises(SandboxError, match="is held by process"):
            sandbox.execute("SELECT 1")
    finally:
        os.close(fd)
    try:
        assert ids(view(sandbox))[-1] == 50  # free now: this use took it
        assert sandbox.held
    finally:
        sandbox.discard()
