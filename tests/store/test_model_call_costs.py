"""Every plan's model calls' cost (``safety.max_total_cost``) is summed from migration 0013's
``events.cost_usd`` column and its index (issue 22): a database made before it gets the costs
of the calls it holds copied from their payloads, and on SQLite the sum reads the index alone,
not the events."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from click.testing import CliRunner
from sqlalchemy import event, text

from cleveragents_tui.cli import cli
from cleveragents_tui.store.database import make_engine, normalise_url
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.usage_queries import MODEL_USAGE

_INSERT = text(
    "INSERT INTO events (plan_id, kind, actor, payload, created_at) "
    "VALUES (NULL, :kind, NULL, :payload, :at)"
)


def test_db_upgrade_copies_the_recorded_calls_costs(db_url: str) -> None:
    """Priced calls count their cost; an unpriced call ($0), a cost that is not a number and
    other events' payloads count nothing, as when each payload was parsed in Python."""
    engine = make_engine(normalise_url(db_url))
    config = Config()
    config.set_main_option("script_location", "cleveragents_tui.store:migrations")
    payloads = [
        (MODEL_USAGE, {"model": "m", "cost_usd": 0.25, "priced": True}),
        (MODEL_USAGE, {"model": "m", "cost_usd": 2, "priced": True}),
        (MODEL_USAGE, {"model": "free", "cost_usd": 0.0, "priced": False}),
        (MODEL_USAGE, {"model": "m", "cost_usd": "0.5"}),
        (MODEL_USAGE, {"model": "m"}),
        ("limit_exceeded", {"cost_usd": 100.0}),
    ]
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0012")
        at = datetime.now(UTC).isoformat()
        for kind, payload in payloads:
            connection.execute(_INSERT, {"kind": kind, "payload": json.dumps(payload), "at": at})
    engine.dispose()

    result = CliRunner().invoke(cli, ["--db", db_url, "db", "upgrade"])

    assert result.exit_code == 0, result.output
    store = Store.open(db_url)
    try:
        with store.unit_of_work() as uow:
            total = uow.usage.total_cost_usd()
        with store.engine.connect() as connection:
            costs = connection.execute(text("SELECT cost_usd FROM events ORDER BY event_id"))
            copied = list(costs.scalars())
    finally:
        store.close()
    assert total == pytest.approx(2.25)
    assert copied == [0.25, 2.0, 0.0, None, None, None]


def test_the_total_reads_the_index_alone_on_sqlite(tmp_path: Path) -> None:
    """The sum's query plan: the partial index covers it (no event row is read)."""
    store = Store.open(str(tmp_path / "agents.db"))
    sent: list[str] = []
    try:
        with store.unit_of_work(write=True) as uow:
            for cost in (0.5, 0.25):
                uow.events.append(MODEL_USAGE, {"model": "m", "cost_usd": cost})
            uow.events.append("limit_exceeded", {"cost_usd": 9.0})
            uow.commit()

        def note(*args: object) -> None:
            sent.append(str(args[2]))

        event.listen(store.engine, "before_cursor_execute", note)
        with store.unit_of_work() as uow:
            total = uow.usage.total_cost_usd()
        event.remove(store.engine, "before_cursor_execute", note)
        [statement] = [s for s in sent if "sum(" in s.lower()]
        with store.engine.connect() as connection:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}").all()
    finally:
        store.close()
    assert total == pytest.approx(0.75)
    details = " ".join(str(row[-1]) for row in plan)
    assert "COVERING INDEX ix_events_model_cost" in details, details
