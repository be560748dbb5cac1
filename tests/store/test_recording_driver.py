"""A recording sent on the driver's cursor stores exactly what SQLAlchemy stored (issue 22).

The recording's statements are compiled once by SQLAlchemy and sent on the driver's
connection with the bind processors applied by hand (store/driver.py). Here the same
recording — every statement a ``Recording`` sends, its transactions as they ended, as the
engine's events hear them — is replayed through SQLAlchemy's own execution into a second
database, and the rows the two hold are compared as the database stores them, byte for byte, on SQLite and PostgreSQL;
the reads give what SQLAlchemy's reads give too.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, Engine, event
from sqlalchemy.exc import IntegrityError

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CheckpointType, SandboxStrategyName
from cleveragents_tui.domain.errors import DatabaseUnavailableError
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store import recording
from cleveragents_tui.store.store import Store
from tests.strategies import decisions, moments
from tests.strategies import text as texts
from tests.support.postgres import PostgresServer
from tests.support.store_rows import add_plan

TABLES = (
    "decisions",
    "decision_dependencies",
    "decision_artifacts",
    "checkpoint_groups",
    "checkpoint_metadata",
    "context_blobs",
    "events",
)
RESOURCE = "local/files"
AT = datetime(2026, 12, 2, 14, 30, 15, 123456, tzinfo=UTC)


Pair = Callable[[], tuple[Store, Store]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    """Two empty databases of the same backend, fresh at each call."""
    opened: list[Store] = []
    dropped: list[str] = []
    server: PostgresServer | None = None
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")

    def pair() -> tuple[Store, Store]:
        n = len(opened)
        if server is None:
            urls = [str(tmp_path / f"{n + k}.db") for k in range(2)]
        else:
            names = [f"t_rec_{secrets.token_hex(6)}" for _ in range(2)]
            urls = [server.create_database(name) for name in names]
            dropped.extend(names)
        opened.extend(Store.open(url) for url in urls)
        return opened[-2], opened[-1]

    yield pair
    for store in opened:
        store.close()
    for name in dropped:
        assert server is not None
        server.drop_database(name)


def _plan_and_root() -> tuple[Plan, Decision]:
    plan = Plan(action="local/driver", created_at=AT, updated_at=AT)
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase="strategize",
        question="q",
        chosen_option="c",
        created_at=AT,
    )
    return plan, root


def _setup(store: Store, plan: Plan, root: Decision) -> None:
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=RESOURCE,
                kind="filesystem",
                location="/tmp/x",
                sandbox_strategy="filesystem_copy",
                created_at=AT,
            )
        )
        uow.commit()
    add_plan(store, plan, [root])


def _checkpoint(decision: Decision, group: recording.NewGroup, n: int) -> CheckpointMetadata:
    return CheckpointMetadata(
        plan_id=decision.plan_id,
        group_id=group.group_id,
        decision_id=decision.decision_id,
        resource_id=RESOURCE,
        checkpoint_type=CheckpointType.DECISION_POINT,
        strategy=SandboxStrategyName.FILESYSTEM_COPY,
        ref=f"ref-{n}",
        created_at=AT + timedelta(microseconds=n),
    )


def _record(store: Store, plan: Plan, root: Decision, decision: Decision, body: str) -> None:
    """What record_decision does through a Recording, every statement of it at least once."""
    group = recording.NewGroup(new_ulid(), plan.plan_id, AT)
    rows = [_checkpoint(decision, group, n) for n in range(3)]
    with store.recordings() as transaction:
        with transaction(False) as rec:
            assert rec.next_sequence_number(plan.plan_id, root.decision_id) == (1, plan.plan_id)
            assert rec.resources_checkpointed(plan.plan_id) == set()
            assert rec.resources_written_since(plan.plan_id, 0) == (set(), 0)
        with transaction(True) as rec:
            rec.append_event("resource_written", {"resource": RESOURCE}, plan_id=plan.plan_id)
            rec.open_group(group, [(RESOURCE, "ref-0")])
            rec.commit()
        with transaction(True) as rec:
            rec.note_refs(group.group_id, [(RESOURCE, "ref-0"), (RESOURCE, "ref-1")])
            rec.put_context("0" * 64, body)
            rec.commit()
        with transaction(True) as rec:  # rolled back: nothing of it is kept
            rec.put_context("1" * 64, "never kept")
        with transaction(True) as rec:
            rec.store_decision(decision, group, [r.model_dump() for r in rows], pending=True)
            rec.put_context("0" * 64, "a second time: not stored")
            rec.add_edges(decision.decision_id, [root.decision_id], "decision")
            rec.append_event("decision_remade", {"key": decision.step_key}, plan_id=plan.plan_id)
            assert rec.count_live(plan.plan_id, RESOURCE) == 3
            live = rec.live_rows(plan.plan_id, RESOURCE)
            assert live == [
                recording.LiveCheckpoint(r.checkpoint_id, r.resource_id, r.checkpoint_type, r.ref)
                for r in rows
            ]
            rec.mark_pruned([live[0].checkpoint_id, live[1].checkpoint_id])
            rec.commit()
        with transaction(False) as rec:
            assert rec.resources_checkpointed(plan.plan_id) == {RESOURCE}
            # the writes read with the number (one statement), then on their own: the same
            number = rec.next_sequence_number(plan.plan_id, decision.decision_id, 0)
            assert number == (2, plan.plan_id)
            with_number = rec.resources_written_since(plan.plan_id, 0)
            assert with_number == rec.resources_written_since(plan.plan_id, 0)
            assert with_number[0] == {RESOURCE}
            assert rec.next_sequence_number(plan.plan_id, None, with_number[1]) == (2, None)
            assert rec.resources_written_since(plan.plan_id, with_number[1]) == (
                set(),
                with_number[1],
            )
            assert rec.count_live(plan.plan_id, RESOURCE) == 1


Heard = tuple[str, Any, Any]  # "execute" with a Core statement and its values, or an end


@contextmanager
def _heard(engine: Engine) -> Iterator[list[Heard]]:
    """What the engine's events hear: each Core statement with its values (a list of them,
    executemany), and each transaction's end."""
    heard: list[Heard] = []

    def execute(_c: Any, statement: Any, multiparams: Any, params: Any, _o: Any) -> None:
        heard.append(("execute", statement, multiparams or params))

    def commit(_c: Any) -> None:
        heard.append(("commit", None, None))

    def rollback(_c: Any) -> None:
        heard.append(("rollback", None, None))

    listeners: dict[str, Callable[..., None]] = {
        "before_execute": execute,
        "commit": commit,
        "rollback": rollback,
    }
    for name, listener in listeners.items():
        event.listen(engine, name, listener)
    try:
        yield heard
    finally:
        for name, listener in listeners.items():
            event.remove(engine, name, listener)


def _replay(connection: Connection, heard: list[Heard]) -> None:
    """The same statements with the same values, executed by SQLAlchemy."""
    for what, statement, values in heard:
        if what == "execute":
            connection.execute(statement, values)
        elif what == "commit":
            connection.commit()
        else:
            connection.rollback()


def _stored(store: Store) -> dict[str, list[Any]]:
    with store.engine.connect() as connection:
        return {
            table: [
                tuple(row)
                for row in connection.exec_driver_sql(f"SELECT * FROM {table} ORDER BY 1")
            ]
            for table in TABLES
        }


FEW = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


@FEW
@given(data=st.data(), created=moments, body=texts)
def test_a_recording_on_the_driver_stores_what_sqlalchemy_stores(
    two_stores: Pair, data: st.DataObject, created: datetime, body: str
) -> None:
    ours, theirs = two_stores()
    plan, root = _plan_and_root()
    drawn = data.draw(decisions(plan.plan_id, root.decision_id, root.decision_id))
    decision = drawn.model_copy(update={"sequence_number": 1, "created_at": created})
    for store in (ours, theirs):
        _setup(store, plan, root)
    with _heard(ours.engine) as heard:
        _record(ours, plan, root, decision, body)
    with theirs.engine.connect() as connection:
        _replay(connection, heard)
        read = connection.execute(
            recording._LIVE_ROWS, {"plan": plan.plan_id, "resource": RESOURCE}
        ).all()

    stored = _stored(ours)
    assert stored == _stored(theirs)
    assert stored["decisions"][-1][0] == decision.decision_id
    counts = {table: len(rows) for table, rows in stored.items()}
    assert counts == {
        "decisions": 2,
        "decision_dependencies": 1
        + len(decision.downstream_decision_ids)
        + len(decision.downstream_plan_ids),
        "decision_artifacts": len(decision.artifacts_produced),
        "checkpoint_groups": 1,
        "checkpoint_metadata": 3,
        "context_blobs": 1,
        "events": 2,
    }
    with ours.recordings() as transaction, transaction(False) as rec:
        assert [tuple(c)[:4] for c in rec.live_rows(plan.plan_id, RESOURCE)] == [
            tuple(row) for row in read
        ]
    with ours.unit_of_work() as uow:
        assert uow.decisions.get(decision.decision_id) == decision


def test_a_refusal_on_the_driver_is_sqlalchemys_error(two_stores: Pair) -> None:
    """The driver's errors read as they did through SQLAlchemy: a decision stored twice
    breaks its key (IntegrityError), and nothing of that transaction is kept."""
    store = two_stores()[0]
    plan, root = _plan_and_root()
    _setup(store, plan, root)
    before = _stored(store)
    with store.recordings() as transaction:
        with transaction(True) as rec, pytest.raises(IntegrityError):
            rec.put_context("2" * 64, "rolled back with the rest")
            rec.store_decision(root)
        with transaction(False) as rec:  # the connection goes on being usable
            assert rec.next_sequence_number(plan.plan_id, None) == (1, None)
            with pytest.raises(ValueError, match="only reads"):  # a read does not write
                rec.put_context("3" * 64, "never stored")
            assert rec.next_sequence_number(plan.plan_id, None) == (1, None)
        with transaction(True) as rec:  # a write transaction after a read one
            rec.put_context("4" * 64, "rolled back")
    assert _stored(store) == before


def test_a_database_moved_while_in_use_is_refused_before_recording(tmp_path: Path) -> None:
    """SQLite goes on writing to a moved file's inode: a recording's write transaction on
    the driver refuses to begin, as SQLAlchemy's did, with the one-line error."""
    store = Store.open(str(tmp_path / "agents.db"))
    try:
        with store.recordings() as transaction, transaction(False) as rec:
            rec.next_sequence_number("01" + "0" * 24, None)
        (tmp_path / "agents.db").rename(tmp_path / "moved.db")
        refused = pytest.raises(DatabaseUnavailableError, match="moved or deleted while in use")
        with refused, store.recordings() as transaction, transaction(True):
            pass
    finally:
        store.close()


def test_a_database_moved_between_recordings_is_refused_at_the_next_one(tmp_path: Path) -> None:
    """The file is checked once a recording, at its first writer: a recording that wrote
    before the move does not let the next one write to the moved file's inode."""
    store = Store.open(str(tmp_path / "agents.db"))
    try:
        with store.recordings() as transaction, transaction(True) as rec:
            rec.put_context("5" * 64, "before the move")
            rec.commit()
        (tmp_path / "agents.db").rename(tmp_path / "moved.db")
        refused = pytest.raises(DatabaseUnavailableError, match="moved or deleted while in use")
        with refused, store.recordings() as transaction, transaction(True):
            pass
    finally:
        store.close()


def test_a_held_connection_is_kept_and_replaced_when_the_server_dropped_it(
    two_stores: Pair,
) -> None:
    """Recordings one after the other use the one connection the store holds (no pool
    checkout, no ping); when the server dropped it in between, the next recording's first
    statement goes again on a new connection; two at once take one more from the pool and
    only one is kept; the store's close returns it."""
    store = two_stores()[0]
    plan, root = _plan_and_root()
    _setup(store, plan, root)
    pids = []
    for _ in range(3):
        with store.recordings() as transaction, transaction(False) as rec:
            assert rec.next_sequence_number(plan.plan_id, None) == (1, None)
            pids.append(id(rec._driver._raw))
        if store.engine.dialect.name == "postgresql":
            with store.engine.connect() as other:  # what a server restart does to it
                other.exec_driver_sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
    if store.engine.dialect.name == "sqlite":
        assert len(set(pids)) == 1
    else:
        assert len(set(pids)) == 3  # each recording found its connection dropped
    pool: Any = store.engine.pool
    assert pool.checkedout() == 1
    with store.recordings(), store.recordings():  # two at once (two threads): one more
        assert pool.checkedout() == 2
    assert pool.checkedout() == 1  # only one is held
    store.close()
    assert pool.checkedout() == 0
