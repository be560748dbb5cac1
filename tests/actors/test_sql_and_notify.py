"""local/run-sql on a real SQLite target's sandbox, and local/notify's outbox."""

from __future__ import annotations

import base64
import json
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from cleveragents_tui.actors.base import ToolContext
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes, sandbox_root
from cleveragents_tui.sandbox.database import DatabaseStrategy
from cleveragents_tui.store.store import Store
from tests.actors.conftest import (
    API,
    DB,
    FILES,
    GIT,
    LAYERED,
    OUTBOX,
    PG,
    ToolWorld,
    postgres_world,
)


def rows(world: ToolWorld) -> list[tuple[int, str]]:
    result = world.sandboxes.get(DB).execute("SELECT id, text FROM greetings ORDER BY id")  # type: ignore[attr-defined]
    return [(int(r[0]), str(r[1])) for r in result]


def test_run_sql_changes_rows_inside_the_transaction(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "sql": "INSERT INTO greetings (text) VALUES (:text)",
            "params": {"text": "hi'); DROP TABLE greetings; --"},
        },
    )
    assert outcome.ok, outcome.output
    assert outcome.output == "1 row(s) affected"
    assert outcome.writes == (DB,)
    assert rows(tool_world) == [(1, "hello"), (2, "hi'); DROP TABLE greetings; --")]
    assert tool_world.sandboxes.modified() == {DB}
    update = tool_world.call(
        "local/run-sql", {"resource": DB, "sql": "UPDATE greetings SET text = 'x'"}
    )
    assert update.output == "2 row(s) affected"


def test_run_sql_leaves_the_real_database_alone(tool_world: ToolWorld) -> None:
    assert tool_world.call("local/run-sql", {"resource": DB, "sql": "DELETE FROM greetings"}).ok
    assert rows(tool_world) == []
    tool_world.sandboxes.get(DB).discard()  # ROLLBACK: what the tool did never lands
    with sqlite3.connect(tool_world.tmp / "target.db") as connection:
        assert connection.execute("SELECT text FROM greetings").fetchall() == [("hello",)]


def test_run_sql_shows_rows(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "sql": "SELECT id, text, :blob AS b FROM greetings",
            "params": {"blob": None},
        },
    )
    assert outcome.ok
    assert outcome.output == '["id", "text", "b"]\n[1, "hello", null]\n[1 row(s)]'


def test_run_sql_shows_the_first_100_rows(tool_world: ToolWorld) -> None:
    insert = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "sql": "INSERT INTO greetings (text) WITH RECURSIVE n(i) AS "
            "(SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150) SELECT 'row ' || i FROM n",
        },
    )
    assert insert.output == "150 row(s) affected"
    outcome = tool_world.call(
        "local/run-sql", {"resource": DB, "sql": "SELECT text FROM greetings ORDER BY id"}
    )
    assert outcome.ok
    lines = outcome.output.splitlines()
    assert lines[0] == '["text"]'
    assert lines[1:3] == ['["hello"]', '["row 1"]']
    assert len(lines) == 1 + 100 + 1
    assert lines[-1] == "[first 100 rows shown; more rows not shown]"


def test_a_failing_statement_is_a_one_line_refusal(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-sql", {"resource": DB, "sql": "SELECT nope FROM missing_table"}
    )
    assert not outcome.ok
    assert outcome.output.startswith("local/run-sql: SQL failed in the sandbox of local/db:")
    assert "no such table: missing_table" in outcome.output
    assert "\n" not in outcome.output
    assert outcome.writes == ()
    assert tool_world.sandboxes.modified() == set()
    assert rows(tool_world) == [(1, "hello")]


@pytest.mark.parametrize("sql", ["COMMIT", "ROLLBACK", "SAVEPOINT x", "BEGIN", "-- hi\nCOMMIT"])
def test_transaction_control_is_refused(tool_world: ToolWorld, sql: str) -> None:
    outcome = tool_world.call("local/run-sql", {"resource": DB, "sql": sql})
    assert not outcome.ok
    assert "refused in the sandbox of local/db" in outcome.output
    assert tool_world.sandboxes.modified() == set()


@pytest.mark.parametrize("resource_id", [GIT, FILES, LAYERED, OUTBOX, API])
def test_run_sql_refuses_other_strategies(tool_world: ToolWorld, resource_id: str) -> None:
    outcome = tool_world.call("local/run-sql", {"resource": resource_id, "sql": "SELECT 1"})
    assert not outcome.ok
    assert f"resource {resource_id} uses strategy" in outcome.output
    assert "only on database resources with strategy transaction_rollback" in outcome.output
    assert tool_world.sandboxes.modified() == set()


def test_notify_appends_to_the_outbox(tool_world: ToolWorld) -> None:
    first = tool_world.call(
        "local/notify", {"resource": OUTBOX, "channel": "#releases", "message": "v1 is out\nyay"}
    )
    assert first.ok, first.output
    assert first.output == "notified #releases (appended to outbox.jsonl)"
    assert first.writes == (OUTBOX,)
    assert tool_world.sandboxes.modified() == {OUTBOX}
    second = tool_world.call(
        "local/notify", {"resource": OUTBOX, "channel": "email:ops", "message": "héllo"}
    )
    assert second.ok
    lines = (tool_world.tmp / "outbox" / "outbox.jsonl").read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["channel"], r["message"]) for r in records] == [
        ("#releases", "v1 is out\nyay"),
        ("email:ops", "héllo"),
    ]
    assert all(sorted(r) == ["channel", "message", "time"] for r in records)
    assert datetime.fromisoformat(records[0]["time"]).utcoffset() is not None


@pytest.mark.parametrize("resource_id", [GIT, FILES, LAYERED, DB])
def test_notify_refuses_sandboxed_resources(tool_world: ToolWorld, resource_id: str) -> None:
    outcome = tool_world.call(
        "local/notify", {"resource": resource_id, "channel": "#x", "message": "hi"}
    )
    assert not outcome.ok
    assert f"resource {resource_id} uses strategy" in outcome.output
    assert "sandbox strategy none" in outcome.output
    assert tool_world.sandboxes.modified() == set()


def test_notify_needs_a_folder_and_a_one_line_channel(tool_world: ToolWorld) -> None:
    remote = tool_world.call("local/notify", {"resource": API, "channel": "#x", "message": "hi"})
    assert not remote.ok
    assert "is not a folder (https://api.example.invalid)" in remote.output
    for channel in ("#x\ny", "#x\x1b[31m", "c" * 201):
        bad = tool_world.call(
            "local/notify", {"resource": OUTBOX, "channel": channel, "message": "hi"}
        )
        assert not bad.ok
        assert "channel must be at most 200 printable characters" in bad.output
    assert not (tool_world.tmp / "outbox" / "outbox.jsonl").exists()
    assert tool_world.sandboxes.modified() == set()


def test_notify_does_not_follow_a_planted_outbox_link(tool_world: ToolWorld) -> None:
    (tool_world.tmp / "outbox" / "outbox.jsonl").symlink_to(tool_world.canary)
    before = tool_world.canary.read_text()
    outcome = tool_world.call(
        "local/notify", {"resource": OUTBOX, "channel": "#x", "message": "hi"}
    )
    assert not outcome.ok
    assert "cannot open outbox.jsonl" in outcome.output
    assert tool_world.canary.read_text() == before
    assert tool_world.sandboxes.modified() == set()


@pytest.mark.postgres
def test_run_sql_on_postgresql(tmp_path: Path, sqlite_store: Store, postgres_url: str) -> None:
    sandboxes, plan = postgres_world(
        sqlite_store,
        tmp_path,
        postgres_url,
        Phase.EXECUTE,
        "CREATE TABLE notes (id serial PRIMARY KEY, body text)",
    )
    sandbox = sandboxes.get(PG)
    context = ToolContext(plan.plan_id, Phase.EXECUTE, sandboxes)
    tool = default_registry().tool("local/run-sql")
    try:
        insert = tool.run(
            context,
            {
                "resource": "local/pg",
                "sql": "INSERT INTO notes (body) VALUES (:body), (:body)",
                "params": {"body": "x"},
            },
        )
        assert insert.output == "2 row(s) affected"
        select = tool.run(
            context, {"resource": "local/pg", "sql": "SELECT id, body FROM notes ORDER BY id"}
        )
        assert select.output == '["id", "body"]\n[1, "x"]\n[2, "x"]\n[2 row(s)]'
        failed = tool.run(context, {"resource": "local/pg", "sql": "SELECT 1/0"})
        assert not failed.ok
        assert "division by zero" in failed.output
        assert "\n" not in failed.output
        # Each statement is its own transaction in the sandbox's copy: a failure ends nothing.
        after = tool.run(context, {"resource": "local/pg", "sql": "SELECT count(*) FROM notes"})
        assert after.output == '["count"]\n[2]\n[1 row(s)]'
        assert sandboxes.modified() == {"local/pg"}
    finally:
        sandbox.discard()


BLOB = bytes(range(256)) + b"\x00\xff"


def test_run_sql_runs_a_list_of_statements_and_binds_blobs(tool_world: ToolWorld) -> None:
    encoded = base64.b64encode(BLOB).decode()
    outcome = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "statements": [
                {"sql": "CREATE TABLE files (name TEXT PRIMARY KEY, data BLOB)"},
                {
                    "sql": "INSERT INTO files VALUES (:name, :data)",
                    "params": {"name": "logo.bin"},
                    "blobs": {"data": encoded},
                },
                {"sql": "SELECT name, length(data), hex(substr(data, 1, 2)) FROM files"},
            ],
        },
    )
    assert outcome.ok, outcome.output
    assert outcome.output == (
        "[statement 1]\nstatement ran"
        '\n[statement 2]\n1 row(s) affected\n[statement 3]\n["name", "length(data)", '
        '"hex(substr(data, 1, 2))"]\n["logo.bin", 258, "0001"]\n[1 row(s)]'
    )
    assert outcome.writes == (DB,)
    sandbox = tool_world.sandboxes.get(DB)
    (stored,) = sandbox.execute("SELECT data FROM files").all()  # type: ignore[attr-defined]
    assert bytes(stored[0]) == BLOB
    single = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "sql": "SELECT :data = data FROM files",
            "blobs": {"data": encoded},
        },
    )
    assert single.output.splitlines()[1] == "[1]"


def test_a_failing_statement_of_a_list_stops_the_rest(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-sql",
        {
            "resource": DB,
            "statements": [
                {"sql": "INSERT INTO greetings (text) VALUES ('one')"},
                {"sql": "INSERT INTO nowhere VALUES (1)"},
                {"sql": "INSERT INTO greetings (text) VALUES ('three')"},
            ],
        },
    )
    assert not outcome.ok
    assert outcome.output.startswith(
        "local/run-sql: statement 2 of 3 failed, the rest did not run (statements 1-1 ran "
        "and stay): SQL failed"
    )
    assert "no such table: nowhere" in outcome.output
    assert "\n" not in outcome.output
    assert outcome.writes == (DB,)
    assert rows(tool_world) == [(1, "hello"), (2, "one")]


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({}, "give either sql (one statement) or statements"),
        (
            {"sql": "SELECT 1", "statements": [{"sql": "SELECT 2"}]},
            "give either sql (one statement) or statements",
        ),
        ({"statements": []}, "must be a non-empty list of objects"),
        ({"statements": ["SELECT 1"]}, "statements[0] must be an object, not str"),
        ({"statements": [{"sql": "SELECT 1", "bind": {}}]}, "statements[0]: unknown argument"),
        ({"statements": [{"params": {}}]}, "statements[0]: argument 'sql' is required"),
        (
            {"statements": [{"sql": "SELECT 1"}], "params": {"a": 1}},
            "give params and blobs inside each statement",
        ),
        ({"statements": [{"sql": "SELECT 1"}] * 101}, "101 statements in one call; at most 100"),
        ({"sql": "SELECT :a", "blobs": {"a": "not base64!"}}, "blobs['a'] is not valid base64"),
        ({"sql": "SELECT :a", "blobs": {"a": 1}}, "blobs['a'] must be a base64 string"),
        (
            {"sql": "SELECT :a", "params": {"a": 1}, "blobs": {"a": "AA=="}},
            "parameter 'a' is given in both params and blobs",
        ),
    ],
)
def test_run_sql_refuses_malformed_calls_before_running_anything(
    tool_world: ToolWorld, arguments: dict[str, object], why: str
) -> None:
    outcome = tool_world.call("local/run-sql", {"resource": DB, **arguments})
    assert not outcome.ok
    assert why in outcome.output, outcome.output
    assert outcome.writes == ()
    assert tool_world.sandboxes.modified() == set()


@pytest.mark.postgres
def test_run_sql_blobs_on_postgresql_survive_a_new_process(
    tmp_path: Path, sqlite_store: Store, postgres_url: str
) -> None:
    resource = Resource(
        resource_id="local/pg",
        kind="database",
        location=postgres_url,
        sandbox_strategy="transaction_rollback",
    )
    plan = Plan(action="local/tools", phase="execute", state="running")
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.plans.add(plan)
        uow.commit()
    sandboxes = PlanSandboxes(sqlite_store, plan.plan_id, tmp_path / "sandboxes")
    sandbox = sandboxes.create(resource)
    context = ToolContext(plan.plan_id, Phase.EXECUTE, sandboxes)
    tool = default_registry().tool("local/run-sql")
    try:
        outcome = tool.run(
            context,
            {
                "resource": "local/pg",
                "statements": [
                    {"sql": "CREATE TABLE files (name text PRIMARY KEY, data bytea)"},
                    {
                        "sql": "INSERT INTO files VALUES (:name, :data)",
                        "params": {"name": "logo.bin"},
                        "blobs": {"data": base64.b64encode(BLOB).decode()},
                    },
                ],
            },
        )
        assert outcome.ok, outcome.output
        # Opened anew, as the next process opens it: the bytes are there as they were bound.
        root = sandbox_root(sandboxes.base_dir, plan.plan_id, resource.resource_id)
        reopened = DatabaseStrategy().open(resource, plan.plan_id, root)
        (stored,) = reopened.execute("SELECT data FROM files").all()
        assert bytes(stored[0]) == BLOB
    finally:
        sandbox.discard()
