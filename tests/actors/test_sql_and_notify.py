"""local/run-sql on a real SQLite target's sandbox, and local/notify's outbox."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

import pytest

from tests.actors.conftest import API, DB, FILES, GIT, LAYERED, OUTBOX, ToolWorld


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
