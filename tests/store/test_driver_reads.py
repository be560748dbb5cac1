"""Reads on the driver's cursor (store/driver_reads.py, issue 22) give the rows SQLAlchemy
gives: the same values after the columns' own processing (aware UTC datetimes, booleans,
PostgreSQL's floats), and the engine's statement listeners still hear them."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from cleveragents_tui.store import driver_reads, snapshot_reads
from tests.support.scale_plan import build
from tests.support.statements import sent_statements


def test_driver_rows_are_sqlalchemys_rows_and_are_heard(tmp_path: Path, db_url: str) -> None:
    scale = build(tmp_path, 50, db_url)
    target = scale.ids[0]
    reads = [
        (snapshot_reads._decision_whole(scale.store.engine.dialect.name), {"id": target}),
        (snapshot_reads._PLAN, {"id": target}),
        (snapshot_reads._CHECKPOINTS, {"id": target}),
        (snapshot_reads._RESOURCES, {}),
    ]
    try:
        with Session(scale.store.engine) as session:
            expected = [[tuple(r) for r in session.execute(s, p)] for s, p in reads]
            with sent_statements(scale.store.engine) as heard:
                got = [driver_reads.fetch(session, s, **p) for s, p in reads]
                batched = driver_reads.batch(session, [(s, None, p) for s, p in reads])
    finally:
        scale.store.close()
    assert all(expected), expected  # every read has rows to compare
    assert [[tuple(r) for r in rows] for rows in got] == expected
    assert [[tuple(r) for r in rows] for rows in batched] == expected
    checkpoint = got[2][0]
    assert checkpoint.created_at.tzinfo is not None  # as the UtcDateTime column gives it
    assert len(heard) == 2 * len(reads)
