"""transaction_rollback: checkpoint (SAVEPOINT + row snapshot) and rollback time.

The target holds ``rows`` rows in two tables. Baseline: inserting a batch of 100 rows in the
same open transaction, the kind of work a tool does between two decisions. Measured on a
SQLite file, and on PostgreSQL when its server binaries are installed.

A SQLite target's sandbox is a copy of the file (``sandbox/sqlite_copy.py``): its
checkpoint, rollback, hand-over to another process and Apply are measured against the
savepoint path they replace and against a plain file copy of the database. A PostgreSQL
target's sandbox is a copy of the database (``sandbox/postgres_copy/``): the same four,
against the savepoint path and a plain ``CREATE DATABASE ... TEMPLATE`` of the target.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy import create_engine, make_url, text

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.postgres_copy import PostgresCopySandbox, PostgresCopyStrategy
from cleveragents_tui.sandbox.sqlite_copy import SqliteCopySandbox, SqliteCopyStrategy
from cleveragents_tui.sandbox.transaction import (
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


Copy = SqliteCopySandbox | PostgresCopySandbox


@contextmanager
def _targets(quick: bool) -> Iterator[tuple[list[tuple[str, str]], PostgresServer | None]]:
    """(label, url) of a SQLite file and, when possible, a PostgreSQL database; its server."""
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
            yield targets, server
        finally:
            if server is not None:
                server.stop()


class _Batches:
    """Inserts batches of fresh rows into a sandbox (the baseline's work)."""

    def __init__(self) -> None:
        self._ids = itertools.count(10_000_000, BATCH)

    def insert(self, sandbox: TransactionRollbackSandbox | Copy) -> None:
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


def _copy_figures(
    sandbox: TransactionRollbackSandbox | Copy, batches: _Batches, repeat: int
) -> dict[str, float]:
    """Checkpoint, rollback of one batch, the next process taking the sandbox over (after
    ten checkpointed batches), and Apply of those batches, in one sandbox of either kind."""
    refs: list[str] = []

    def setup() -> None:
        refs.append(sandbox.checkpoint())
        batches.insert(sandbox)

    figures = {
        "checkpoint": best_of(sandbox.checkpoint, repeat),
        "rollback": best_of(lambda: sandbox.rollback(refs[-1]), repeat, setup),
    }
    for _ in range(10):
        setup()
    if isinstance(sandbox, TransactionRollbackSandbox):

        def take_over() -> None:  # hand over, then the next use replays the statement log
            assert sandbox.hand_over()
            sandbox.checkpoint()
    else:
        strategy = (
            SqliteCopyStrategy()
            if isinstance(sandbox, SqliteCopySandbox)
            else PostgresCopyStrategy()
        )

        def take_over() -> None:  # a new process opens the files as they are
            strategy.open(sandbox.resource, "BENCH", sandbox.root).checkpoint()

    figures["take over"] = best_of(take_over, repeat)
    figures["apply"] = best_of(sandbox.apply, 1)
    return figures


def _durable_copy(path: Path, root: Path) -> None:
    """A plain file copy of the database, fsynced (as durable as a checkpoint)."""
    copied = shutil.copyfile(path, root / "plain-copy.db")
    fd = os.open(copied, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _measure_copy(rows: int, repeat: int, root: Path) -> list[Measurement]:
    """The SQLite file-copy sandbox against the savepoint path and a plain file copy."""
    figures: dict[str, dict[str, float]] = {}
    for kind in ("savepoint", "copy"):
        path = root / f"copy-target-{kind}.db"
        sqlite3.connect(path).close()
        _seed(f"sqlite:///{path}", rows)
        resource = Resource(
            resource_id="bench/target",
            kind="database",
            location=str(path),
            sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK,
        )
        sandbox: TransactionRollbackSandbox | SqliteCopySandbox
        if kind == "copy":
            sandbox = SqliteCopyStrategy().create(resource, "BENCH", root / "copy-sandbox")
        else:
            strategy = TransactionRollbackStrategy(max_snapshot_rows=10 * rows)
            sandbox = strategy.create(resource, "BENCH", root / "savepoint-sandbox")
        try:
            figures[kind] = _copy_figures(sandbox, _Batches(), repeat)
        finally:
            sandbox.discard()
        if kind == "copy":
            figures["file"] = {"copy": best_of(partial(_durable_copy, path, root), repeat)}
    file_copy = figures["file"]["copy"]
    copy, savepoint = figures["copy"], figures["savepoint"]
    prefix = f"sqlite, {rows} rows, file-copy sandbox:"
    today = "savepoint sandbox (today's path, row snapshots on):"
    rows_ = [
        ("checkpoint (file copy + fsync)", copy["checkpoint"], "plain file copy + fsync", file_copy, "informational"),
        ("checkpoint (file copy + fsync)", copy["checkpoint"], f"{today} checkpoint",
         savepoint["checkpoint"], "informational"),
        (f"rollback of {BATCH} inserts", copy["rollback"], "plain file copy + fsync", file_copy, "informational"),
        (f"rollback of {BATCH} inserts", copy["rollback"], f"{today} rollback",
         savepoint["rollback"], "informational"),
        ("next process takes it over (open + checkpoint)", copy["take over"],
         f"{today} hand over + replay of {10 * BATCH} inserts + checkpoint",
         savepoint["take over"], "≤ 1× baseline"),
        (f"Apply of {10 * BATCH} inserts (row diff, one transaction)",
         copy["apply"], f"{today} COMMIT (with change listing)", savepoint["apply"],
         "informational"),
    ]  # fmt: skip
    return [
        Measurement(
            group=GROUP,
            name=f"{prefix} {name}",
            seconds=seconds,
            baseline=baseline,
            baseline_seconds=base_seconds,
            target=target,
            met=None if target == "informational" else seconds <= base_seconds,
        )
        for name, seconds, baseline, base_seconds, target in rows_
    ]


def _template_copy(url: str) -> None:
    """A plain copy of the database on its server (CREATE DATABASE ... TEMPLATE), dropped
    before the next one: the least a copy of a PostgreSQL database costs."""
    target = make_url(url)
    conninfo = target.set(drivername="postgresql", database="postgres").render_as_string(
        hide_password=False
    )
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS bench_plain_copy"))
        admin.execute(
            sql.SQL("CREATE DATABASE bench_plain_copy TEMPLATE {}").format(
                sql.Identifier(str(target.database))
            )
        )


def _measure_pg_copy(
    server: PostgresServer, rows: int, repeat: int, root: Path
) -> list[Measurement]:
    """The PostgreSQL copy sandbox against the savepoint path and a plain template copy."""
    figures: dict[str, dict[str, float]] = {}
    for kind in ("savepoint", "copy"):
        url = server.create_database(f"bench_{kind}")
        _seed(url, rows)
        resource = Resource(
            resource_id="bench/target",
            kind="database",
            location=url,
            sandbox_strategy=SandboxStrategyName.TRANSACTION_ROLLBACK,
        )
        sandbox: TransactionRollbackSandbox | PostgresCopySandbox
        if kind == "copy":
            figures["plain"] = {"copy": best_of(partial(_template_copy, url), repeat)}
            sandbox = PostgresCopyStrategy().create(resource, "BENCH", root / "pg-copy-sandbox")
        else:
            strategy = TransactionRollbackStrategy(max_snapshot_rows=10 * rows)
            sandbox = strategy.create(resource, "BENCH", root / "pg-savepoint-sandbox")
        try:
            figures[kind] = _copy_figures(sandbox, _Batches(), repeat)
        finally:
            sandbox.discard()
    plain = figures["plain"]["copy"]
    copy, savepoint = figures["copy"], figures["savepoint"]
    prefix = f"postgresql, {rows} rows, database-copy sandbox:"
    today = "savepoint sandbox (today's path, row snapshots on):"
    template = "plain CREATE DATABASE ... TEMPLATE"
    rows_ = [
        ("checkpoint (template copy)", copy["checkpoint"], template, plain, "informational"),
        ("checkpoint (template copy)", copy["checkpoint"], f"{today} checkpoint",
         savepoint["checkpoint"], "informational"),
        (f"rollback of {BATCH} inserts", copy["rollback"], template, plain, "informational"),
        (f"rollback of {BATCH} inserts", copy["rollback"], f"{today} rollback",
         savepoint["rollback"], "informational"),
        ("next process takes it over (open + checkpoint)", copy["take over"],
         f"{today} hand over + replay of {10 * BATCH} inserts + checkpoint",
         savepoint["take over"], "≤ 1× baseline"),
        (f"Apply of {10 * BATCH} inserts (row diff, one transaction)",
         copy["apply"], f"{today} COMMIT (with change listing)", savepoint["apply"],
         "informational"),
    ]  # fmt: skip
    return [
        Measurement(
            group=GROUP,
            name=f"{prefix} {name}",
            seconds=seconds,
            baseline=baseline,
            baseline_seconds=base_seconds,
            target=target,
            met=None if target == "informational" else seconds <= base_seconds,
        )
        for name, seconds, baseline, base_seconds, target in rows_
    ]


def run(quick: bool) -> list[Measurement]:
    rows = 2_000 if quick else 20_000
    repeat = 3 if quick else 7
    measurements: list[Measurement] = []
    with _targets(quick) as (targets, server), tempfile.TemporaryDirectory() as tmp:
        for label, url in targets:
            measurements += _measure(label, url, rows, repeat, Path(tmp))
        measurements += _measure_copy(rows, repeat, Path(tmp))
        if server is not None:
            measurements += _measure_pg_copy(server, rows, repeat, Path(tmp))
    return measurements
