"""A correction's preview reads one snapshot without the ORM's session (store/reading.py),
and keeps a plan's plan-level reads per connection until the database changes
(store/snapshot_reads.basics, issue 22)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, func, select, text
from sqlalchemy.exc import DBAPIError

from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store import snapshot_reads
from cleveragents_tui.store.driver_reads import fetch
from cleveragents_tui.store.store import Store
from tests.support.scale_plan import ScalePlan, build
from tests.support.statements import sent_statements


def _resource(name: str, base: Path) -> Resource:
    return Resource(
        resource_id=f"test/{name}",
        kind="external",
        location=str(base / name),
        sandbox_strategy="none",
    )


def _register(store: Store, resource: Resource) -> None:
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.commit()


def _basics(scale: ScalePlan) -> tuple[snapshot_reads.Basics, int]:
    with sent_statements(scale.store.engine) as heard, scale.store.reading() as reading:
        read = reading.run(snapshot_reads.basics, scale.ids[0])
    return read, len(heard)


def test_plan_level_reads_are_kept_until_the_database_changes(tmp_path: Path, db_url: str) -> None:
    scale = build(tmp_path, 20, db_url)
    other = Store.open(db_url)  # another engine: another connection
    try:
        first, cold = _basics(scale)
        again, kept = _basics(scale)
        assert kept < cold  # the plan, its checkpoints, guidance and the resources not read
        assert again.resources == first.resources and again.plan == first.plan
        _register(other, _resource("by-another-connection", tmp_path))
        seen, after_other = _basics(scale)
        _register(scale.store, _resource("by-this-store", tmp_path))
        seen_too, after_own = _basics(scale)
    finally:
        other.close()
        scale.store.close()
    assert "test/by-another-connection" in {r.resource_id for r in seen.resources}
    assert "test/by-this-store" in {r.resource_id for r in seen_too.resources}
    assert after_other == after_own == cold


def test_a_reading_is_one_snapshot_on_sqlite(tmp_path: Path) -> None:
    scale = build(tmp_path, 20)
    other = Store.open(str(tmp_path / "agents.db"))
    try:
        with scale.store.reading() as reading:
            before = fetch(reading, snapshot_reads._RESOURCES)
            _register(other, _resource("meanwhile", tmp_path))
            during = fetch(reading, snapshot_reads._RESOURCES)
        after = _basics(scale)[0].resources
    finally:
        other.close()
        scale.store.close()
    assert during == before  # the resource committed meanwhile is not in the snapshot
    assert len(after) == len(before) + 1


def test_a_session_opened_in_a_reading_joins_its_transaction(tmp_path: Path, db_url: str) -> None:
    scale = build(tmp_path, 20, db_url)
    target = scale.ids[0]
    try:
        with scale.store.reading() as reading:
            assert reading.resolve_decision(target[:12].lower()) == target  # the session's
            assert reading.run(snapshot_reads.basics, target).decision.decision_id == target
        with scale.store.engine.connect() as connection:  # given back with nothing begun
            raw: Any = connection.connection.dbapi_connection
            if scale.store.engine.dialect.name == "sqlite":
                assert not raw.in_transaction
            else:
                assert not raw.autocommit
        _register(scale.store, _resource("after", tmp_path))  # no lock left behind
    finally:
        scale.store.close()


def test_a_missing_decision_is_not_found_in_a_reading(tmp_path: Path, db_url: str) -> None:
    scale = build(tmp_path, 20, db_url)
    try:
        with scale.store.reading() as reading, pytest.raises(NotFoundError, match="does not exist"):
            reading.run(snapshot_reads.basics, "0" * 26)
    finally:
        scale.store.close()


def test_a_statement_refused_in_a_reading_raises_as_the_store_raises_it(
    tmp_path: Path, db_url: str
) -> None:
    """The driver's refusal is sent again through SQLAlchemy (store/driver_reads._raw):
    inside a Reading its error is the statement's own, not one about the transaction."""
    nowhere = Table("no_such_table", MetaData(), Column("x", Integer))
    scale = build(tmp_path, 20, db_url)
    try:
        with scale.store.reading() as reading, pytest.raises(DBAPIError) as raised:
            fetch(reading, select(nowhere.c.x))
    finally:
        scale.store.close()
    assert "no_such_table" in str(raised.value)
    assert "within a transaction" not in str(raised.value)


def test_the_held_reading_connection_is_used_again_and_replaced_once_dropped(
    tmp_path: Path, postgres_url: str
) -> None:
    """The previews' connection is held from one reading to the next (its prepared
    statements with it); one the server dropped meanwhile is replaced, and the reading
    goes on."""
    scale = build(tmp_path, 20, postgres_url)
    try:
        pids = []
        for _ in range(2):
            with scale.store.reading() as reading:
                pids.append(fetch(reading, select(func.pg_backend_pid()))[0][0])
                reading.run(snapshot_reads.basics, scale.ids[0])
        with scale.store.engine.connect() as connection:
            connection.execute(select(func.pg_terminate_backend(pids[-1])))
        with scale.store.reading() as reading:
            pids.append(fetch(reading, select(func.pg_backend_pid()))[0][0])
            read = reading.run(snapshot_reads.basics, scale.ids[0])
    finally:
        scale.store.close()
    assert pids[0] == pids[1] != pids[2]
    assert read.decision.decision_id == scale.ids[0]


def _rolled_back_write(store: Store, target: str, by: str) -> None:
    with store.engine.connect() as connection, connection.begin() as transaction:
        connection.execute(
            text("UPDATE decisions SET superseded_by = :by WHERE decision_id = :d"),
            {"d": target, "by": by},
        )
        transaction.rollback()


def test_kept_reads_stay_after_writes_rolled_back_and_go_at_a_commit(
    tmp_path: Path, db_url: str
) -> None:
    """Writes rolled back change nothing a preview reads: on PostgreSQL the plan-level reads
    stay kept (the transactions its new snapshot sees were all rolled back; on SQLite a
    pooled connection's count of changes moves, and they are read again). A commit among
    them, or more transactions than are looked at, reads them again."""
    scale = build(tmp_path, 20, db_url)
    target, by = scale.ids[0], scale.ids[1]
    try:
        first, _ = _basics(scale)
        for _ in range(3):
            _rolled_back_write(scale.store, target, by)
        kept, _ = _basics(scale)
        _rolled_back_write(scale.store, target, by)
        _register(scale.store, _resource("among-rolled-back", tmp_path))
        _rolled_back_write(scale.store, target, by)
        seen, _ = _basics(scale)
        for _ in range(70):
            _rolled_back_write(scale.store, target, by)
        many, _ = _basics(scale)
    finally:
        scale.store.close()
    if db_url.startswith("postgresql"):
        assert kept.resources is first.resources
    assert kept.resources == first.resources
    assert "test/among-rolled-back" in {r.resource_id for r in seen.resources}
    assert many.resources == seen.resources
