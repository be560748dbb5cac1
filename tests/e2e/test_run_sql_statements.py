"""``local/run-sql`` with a statement list and BLOB values in a running plan, on SQLite and
PostgreSQL: a revert before it restores the rows exactly, and Apply lands the bytes
(issue 20, item 6)."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store

DB = "local/files-db"
BLOB = bytes(range(256)) * 4 + b"\x00"
ICON = b"\x89PNG\r\n\x1a\n\x00\x00"


def sql(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"tool": "local/run-sql", "arguments": {"resource": DB, "statements": list(statements)}}


def blob(data: bytes) -> str:
    return base64.b64encode(data).decode()


def action() -> Action:
    insert = "INSERT INTO files (name, data) VALUES (:name, :data)"
    return Action.model_validate(
        {
            "name": "local/load-files",
            "prompt": "load the files",
            "resources": [DB],
            "decisions": [
                {
                    "key": "first",
                    "type": "implementation_choice",
                    "question": "Seed a file?",
                    "alternatives": [
                        {
                            "option": "seed.txt",
                            "tool_calls": [
                                sql(
                                    {
                                        "sql": "INSERT INTO files VALUES ('seed.txt', :data)",
                                        "blobs": {"data": blob(b"\n")},
                                    }
                                )
                            ],
                        }
                    ],
                },
                {
                    "key": "load",
                    "type": "implementation_choice",
                    "question": "Load the binaries?",
                    "alternatives": [
                        {
                            "option": "load them",
                            "match": ["load"],
                            "tool_calls": [
                                sql(
                                    {
                                        "sql": insert,
                                        "params": {"name": "logo.bin"},
                                        "blobs": {"data": blob(BLOB)},
                                    },
                                    {
                                        "sql": insert,
                                        "params": {"name": "icon.png"},
                                        "blobs": {"data": blob(ICON)},
                                    },
                                    {"sql": "DELETE FROM files WHERE name = 'old.bin'"},
                                )
                            ],
                        },
                        {"option": "skip them", "match": ["skip", "none"]},
                    ],
                },
            ],
        }
    )


class Target:
    """The user's database, on SQLite or PostgreSQL, with a table of named byte strings."""

    def __init__(self, location: str, url: str) -> None:
        self.location, self.url = location, url
        self.run(
            "CREATE TABLE files (name TEXT PRIMARY KEY, data "
            + ("BLOB)" if url.startswith("sqlite") else "BYTEA)"),
            "INSERT INTO files VALUES ('old.bin', :old)",
        )

    def run(self, *statements: str) -> None:
        engine = create_engine(self.url, poolclass=NullPool)
        try:
            with engine.begin() as connection:
                for statement in statements:
                    connection.execute(text(statement), {"old": b"\x01\x02"})
        finally:
            engine.dispose()

    def rows(self) -> dict[str, bytes]:
        engine = create_engine(self.url, poolclass=NullPool)
        try:
            with engine.connect() as connection:
                found = connection.execute(text("SELECT name, data FROM files")).all()
        finally:
            engine.dispose()
        return {str(name): bytes(data) for name, data in found}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path, sqlite_store: Store) -> Target:
    if request.param == "sqlite":
        path = tmp_path / "files.db"
        sqlite3.connect(path).close()
        made = Target(str(path), f"sqlite:///{path}")
    else:
        url = str(request.getfixturevalue("postgres_url"))
        made = Target(url, url)
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=DB,
                kind="database",
                location=made.location,
                sandbox_strategy="transaction_rollback",
            )
        )
        uow.commit()
    return made


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def at_gate(store: Store, options: RunOptions) -> Plan:
    plan = start_plan(store, action(), profile_override="auto", options=options)
    assert plan.state is PlanState.AWAITING_APPROVAL, plan
    return plan


def test_apply_lands_the_blobs_a_statement_list_wrote(
    sqlite_store: Store, options: RunOptions, target: Target
) -> None:
    plan = at_gate(sqlite_store, options)
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED
    assert target.rows() == {"seed.txt": b"\n", "logo.bin": BLOB, "icon.png": ICON}


def test_a_revert_before_the_statement_list_restores_the_rows_exactly(
    sqlite_store: Store, options: RunOptions, target: Target
) -> None:
    plan = at_gate(sqlite_store, options)
    with sqlite_store.unit_of_work() as uow:
        current = uow.decisions.for_plan(plan.plan_id, include_superseded=False)
        load = next(d.decision_id for d in current if d.step_key == "load")
    impact = preview(sqlite_store, load, CorrectionMode.REVERT, "skip the binaries, load none")
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status is CorrectionStatus.SUCCEEDED
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED
    assert target.rows() == {"old.bin": b"\x01\x02", "seed.txt": b"\n"}
