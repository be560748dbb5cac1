"""transaction_rollback: checkpoint (SAVEPOINT + row snapshot) and rollback time.

The target holds ``rows`` rows in two tables. Baseline: inserting a batch of 100 rows in the
same open transaction, the kind of work a tool does between two decisions. Measured on a
SQLite file, and on PostgreSQL when its server binaries are installed.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.transaction_rollback import (
    TransactionRollbackSandbox,
    TransactionRollbackStrategy,
)
from tests.benchmarks.harness import Measurement, best_of
from tests.support.postgres import PostgresServer, find_bindir

BATCH = 100
GROUP = "transaction_rollback"


def _seed(url: str, rows: int) -> None:
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, qty INT)"))
        connection.execute(text("CREATE TABLE events (msg TEXT)"))
        connection.execute(
            text("INSERT INTO items VALUES (:id, :name, :qty)"),
            [{"id": i, "name": f"item {i}", "qty": i % 7} for i in range(rows // 2)],
        )
        connection.execute(
            text("INSERT INTO events VALUES (:msg)"),
            [{"msg": f"event {i}"} for i in range(rows - rows // 2)],
        )
    engine.dispose()


@contextmanager
def _targets(quick: bool) -> Iterator[list[tuple[str, str]]]:
    """(label, url) of a SQLite file and, when possible, a PostgreSQL database."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "target.db"
        sqlite3.connect(path).close()
        targets = [("sqlite", str(path))]
        server = None
        bindir = find_bindir()
        if bindir is not None and not quick:
            server = PostgresServer(bindir)
            try:
                server.start()
                targets.append(("postgresql", server.create_database("bench")))
            except Exception as exc:  # report and go on with SQLite only
                print(f"  (PostgreSQL skipped: {exc})")
                server.stop()
                server = None
        try:
            yield targets
        finally:
            if server is not None:
                server.stop()


class _Batches:
    """Inserts batches of fresh rows into a sandbox (the baseline's work)."""

    def __init__(self) -> None:
        self._ids = itertools.count(10_000_000, BATCH)

    def insert(self, sandbox: TransactionRollbackSandbox) -> None:
        start = next(self._ids)
        sandbox.execute(
            "INSERT INTO items VALUES (:id, 'new', 1)", [{"id": start + n} for n in range(BATCH)]
        )


def _time_sandbox(
    sandbox: TransactionRollbackSandbox, batches: _Batches, repeat: int
) -> tuple[float, float, float]:
    """(INSERT batch, checkpoint, rollback of one batch) best-of times in one sandbox."""
    refs: list[str] = []

    def setup() -> None:
        refs.append(sandbox.checkpoint())
        batches.insert(sandbox)

    insert = best_of(lambda: batches.insert(sandbox), repeat)
    checkpoint = best_of(sandbox.checkpoint, repeat)
    rollback = best_of(lambda: sandbox.rollback(refs[-1]), repeat, setup)
    return insert, checkpoint, rollback


def _measure(label: str, url: str, rows: int, repeat: int, root: Path) -> list[Measurement]:
    _seed(url if "://" in url else f"sqlite:///{url}", rows)
    resource = Resource(
        resource_id="bench/target",
        kind="database",
        location=url,
        sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK,
    )
    batches = _Batches()
    figures: dict[bool, tuple[float, float, float]] = {}
    for snapshots in (True, False):
        strategy = TransactionRollbackStrategy(max_snapshot_rows=10 * rows if snapshots else 0)
        sandbox = strategy.create(resource, "BENCH", root / f"{label}-{snapshots}")
        try:
            figures[snapshots] = _time_sandbox(sandbox, batches, repeat)
        finally:
            sandbox.discard()
    baseline = figures[False][0]
    results = [
        ("checkpoint with row snapshot", figures[True][1], "informational"),
        ("checkpoint, SAVEPOINT only", figures[False][1], "≤ 1× baseline"),
        (f"rollback of {BATCH} inserts (snapshots on)", figures[True][2], "≤ 1× baseline"),
        (f"rollback of {BATCH} inserts (snapshots off)", figures[False][2], "≤ 1× baseline"),
    ]
    return [
        Measurement(
            group=GROUP,
            name=f"{label}, {rows} rows: {name}",
            seconds=seconds,
            baseline=f"INSERT batch of {BATCH}",
            baseline_seconds=baseline,
            target=target,
            met=None if target == "informational" else seconds <= baseline,
        )
        for name, seconds, target in results
    ]


def run(quick: bool) -> list[Measurement]:
    rows = 2_000 if quick else 20_000
    repeat = 3 if quick else 7
    measurements: list[Measurement] = []
    with _targets(quick) as targets, tempfile.TemporaryDirectory() as tmp:
        for label, url in targets:
            measurements += _measure(label, url, rows, repeat, Path(tmp))
    return measurements
