"""A database whose rows are not deterministic (``CURRENT_TIMESTAMP``, a trigger writing
``datetime('now')``, ``random()``) is corrected and applied through the CLI, each command in
its own process, and the real database ends up with exactly the rows the corrected plan made.

Before the database sandbox was a copy of the file, every process replayed a statement log:
the replayed rows differed from the first run's, ``plan correct`` was refused ("the rows at
savepoint ... differ") and ``plan apply`` landed nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store.store import Store
from tests.support.cli_output import heading_plan_id


def _sql(sql: str) -> dict[str, object]:
    return {"tool": "local/run-sql", "arguments": {"resource": "rel/app-db", "sql": sql}}


RELEASE = {
    "name": "rel/release",
    "prompt": "record the release",
    "resources": ["rel/app-db"],
    "decisions": [
        {
            "key": "plan",
            "type": "strategy_choice",
            "question": "How is it recorded?",
            "alternatives": [{"option": "a release row (the trigger writes the audit)"}],
        },
        {
            "key": "record",
            "type": "implementation_choice",
            "parent": "plan",
            "question": "Which version?",
            "alternatives": [
                {
                    "option": "a minor release 1.1.0",
                    "tool_calls": [_sql("INSERT INTO releases (version) VALUES ('1.1.0')")],
                },
                {
                    "option": "a major release 2.0.0",
                    "tool_calls": [_sql("INSERT INTO releases (version) VALUES ('2.0.0')")],
                },
            ],
        },
        {
            "key": "note",
            "type": "tool_invocation",
            "parent": "plan",
            "depends_on": ["record"],
            "question": "What does the note say?",
            "alternatives": [
                {
                    "option": "a short note",
                    "tool_calls": [_sql("INSERT INTO notes (body) VALUES ('released')")],
                },
            ],
        },
    ],
}

SCHEMA = """
CREATE TABLE releases (
    id INTEGER PRIMARY KEY,
    version TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    token INTEGER NOT NULL DEFAULT (random())
);
INSERT INTO releases (version, created_at, token) VALUES ('1.0.0', '2020-01-01 00:00:00', 7);
CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT NOT NULL, at TEXT NOT NULL,
                    nonce INTEGER NOT NULL);
CREATE TRIGGER releases_audit AFTER INSERT ON releases BEGIN
    INSERT INTO audit (what, at, nonce)
    VALUES ('release ' || NEW.version, datetime('now'), random());
END;
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL,
                    at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
"""


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    connection = sqlite3.connect(path)
    try:
        return {
            table: connection.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
            for table in ("releases", "audit", "notes")
        }
    finally:
        connection.close()


@pytest.fixture
def target(sqlite_store: Store, tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    connection = sqlite3.connect(path)
    connection.executescript(SCHEMA)
    connection.close()
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id="rel/app-db",
                kind="database",
                location=str(path),
                sandbox_strategy="transaction_rollback",
            )
        )
        uow.commit()
    return path


class Cli:
    """``agents --db URL ...``, each call a new process, as a person at a shell runs it."""

    def __init__(self, db_url: str, home: Path) -> None:
        self.db_url = db_url
        self.env = {
            **os.environ,
            "HOME": str(home),
            "AGENTS_SANDBOX_DIR": str(home / "sandboxes"),
        }

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cleveragents_tui", "--db", self.db_url, *args],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
            timeout=300,
        )


def _decision(cli: Cli, plan_id: str, option_start: str) -> dict[str, Any]:
    """The current decision of ``plan_id`` whose chosen option starts with ``option_start``."""
    tree = cli("plan", "tree", plan_id, "--format=json")
    assert tree.returncode == 0, tree.stderr
    decisions = json.loads(tree.stdout)["decisions"]
    return next(d for d in decisions if d["chosen_option"].startswith(option_start))


def test_a_sqlite_database_with_now_and_a_trigger_is_corrected_and_applied_by_the_cli(
    target: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """Run, correct and apply are three processes: the correction goes through, and the
    real database gets exactly the rows the corrected plan made (timestamps and random
    values included), which ``plan diff`` showed before the Apply."""
    action = tmp_path / "release.action.yaml"
    action.write_text(yaml.safe_dump(RELEASE))
    cli = Cli(sqlite_url, tmp_path)
    before = _rows(target)

    started = cli("plan", "use", str(action), "--automation-profile", "auto")
    assert started.returncode == 0, started.stderr
    plan_id = heading_plan_id(started.stdout)
    record = _decision(cli, plan_id, "a minor release")
    assert _rows(target) == before  # nothing lands before Apply

    corrected = cli(
        "plan", "correct", record["decision_id"], "--mode=revert",
        "--guidance", "a major release", "--yes", "--format=json",
    )  # fmt: skip
    assert corrected.returncode == 0, corrected.stderr
    correction_id = json.loads(corrected.stdout)["correction"]["correction_id"]
    assert _decision(cli, plan_id, "a major release")["superseded_by"] is None
    diff = cli("plan", "diff", "--correction", correction_id)
    assert diff.returncode == 0, diff.stderr

    applied = cli("plan", "apply", plan_id)
    assert applied.returncode == 0, applied.stderr

    after = _rows(target)
    assert [row[1] for row in after["releases"]] == ["1.0.0", "2.0.0"]
    assert [row[1] for row in after["audit"]] == ["release 2.0.0"]
    assert [row[1] for row in after["notes"]] == ["released"]
    # The values the corrected plan produced, as the correction's diff showed them.
    shown = diff.stdout
    new_release, audit_line = after["releases"][1], after["audit"][0]
    assert str(new_release[3]) in shown and audit_line[2] in shown and str(audit_line[3]) in shown
    show = cli("plan", "show", plan_id, "--format=json")
    assert json.loads(show.stdout)["plan"]["state"] == "applied", show.stdout


def test_an_apply_that_conflicts_fails_in_one_line_and_lands_nothing(
    target: Path, sqlite_url: str, tmp_path: Path
) -> None:
    """Someone adds release id 2 to the real database while the plan waits at its Apply
    gate: the plan's own row 2 cannot land. Apply says so in one line and exits 3 (Apply
    refused, docs/user-guide.md); the real
    database keeps exactly what it had (no audit line, no note half-landed)."""
    action = tmp_path / "release.action.yaml"
    action.write_text(yaml.safe_dump(RELEASE))
    cli = Cli(sqlite_url, tmp_path)
    started = cli("plan", "use", str(action), "--automation-profile", "auto")
    assert started.returncode == 0, started.stderr
    plan_id = heading_plan_id(started.stdout)
    connection = sqlite3.connect(target)
    with connection:
        connection.execute("INSERT INTO releases (id, version) VALUES (2, 'hotfix')")
    connection.close()
    before = _rows(target)

    applied = cli("plan", "apply", plan_id)

    assert applied.returncode == 3, applied.stdout + applied.stderr
    lines = applied.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was applied to rel/app-db" in lines[0], lines
    assert "row (2,) of table releases changed" in lines[0]
    assert _rows(target) == before
