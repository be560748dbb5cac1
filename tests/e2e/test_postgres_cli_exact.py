"""A PostgreSQL database whose rows are not deterministic (``DEFAULT now()``, ``random()``,
``gen_random_uuid()``, a ``serial`` and an identity column, a trigger writing
``clock_timestamp()``) is run, corrected and applied through the CLI, each command in its
own process, and the real database ends up with exactly the rows the corrected plan made.

Before the PostgreSQL sandbox was a copy of the database, every process replayed a
statement log: the replayed rows differed from the first run's, ``plan correct`` was
refused ("was lost on restart ... rows differ") and ``plan apply`` landed nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from cleveragents_tui.cli.outcome import CONSTRAINED_EXIT
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store.store import Store
from tests.e2e.test_database_cli_exact import Cli, _decision
from tests.support.cli_output import heading_plan_id

pytestmark = pytest.mark.postgres


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
            "key": "announce",
            "type": "tool_invocation",
            "parent": "plan",
            "question": "Announce it first?",
            "alternatives": [
                {
                    "option": "an announcement note",
                    "tool_calls": [_sql("INSERT INTO notes (body) VALUES ('coming soon')")],
                },
            ],
        },
        {
            "key": "record",
            "type": "implementation_choice",
            "parent": "plan",
            "depends_on": ["announce"],
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

SCHEMA = [
    "CREATE TABLE releases (id serial PRIMARY KEY, version text NOT NULL, "
    "created_at timestamptz NOT NULL DEFAULT now(), "
    "token double precision NOT NULL DEFAULT random(), "
    "uid uuid NOT NULL DEFAULT gen_random_uuid())",
    "INSERT INTO releases (version, created_at, token, uid) VALUES "
    "('1.0.0', '2020-01-01 00:00:00+00', 0.5, '00000000-0000-0000-0000-000000000001')",
    "CREATE TABLE audit (id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "what text NOT NULL, at timestamptz NOT NULL, nonce double precision NOT NULL)",
    "CREATE FUNCTION audit_release() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN "
    "INSERT INTO audit (what, at, nonce) "
    "VALUES ('release ' || NEW.version, clock_timestamp(), random()); RETURN NEW; END$$",
    "CREATE TRIGGER releases_audit AFTER INSERT ON releases FOR EACH ROW "
    "EXECUTE FUNCTION audit_release()",
    "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL, "
    "at timestamptz NOT NULL DEFAULT now())",
]
TABLES = ("releases", "audit", "notes")


def _query(url: str, *statements: str) -> list[list[tuple[Any, ...]]]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(text("SET TimeZone = 'UTC'"))
            results = []
            for statement in statements:
                result = connection.execute(text(statement))
                results.append([tuple(row) for row in result] if result.returns_rows else [])
            return results
    finally:
        engine.dispose()


def _rows(url: str) -> dict[str, list[str]]:
    """Every row of the three tables, each value as PostgreSQL prints it."""
    found = _query(
        url,
        *(f"SELECT t::text FROM {table} AS t ORDER BY id" for table in TABLES),
    )
    return {table: [str(row[0]) for row in rows] for table, rows in zip(TABLES, found, strict=True)}


def _sandbox_databases(url: str) -> list[str]:
    found = _query(url, "SELECT datname FROM pg_database WHERE datname LIKE 'agents\\_%'")
    return sorted(str(name) for (name,) in found[0])


def _sandbox_work_database(url: str) -> str:
    """The URL of the one sandbox working copy on the server (the plan's)."""
    ((name,),) = _query(
        url, "SELECT datname FROM pg_database WHERE datname LIKE 'agents\\_%\\_work'"
    )[0]
    return make_url(url).set(database=str(name)).render_as_string(hide_password=False)


@pytest.fixture
def target(sqlite_store: Store, postgres_url: str) -> Iterator[str]:
    _query(postgres_url, *SCHEMA)
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id="rel/app-db",
                kind="database",
                location=postgres_url,
                sandbox_strategy="transaction_rollback",
            )
        )
        uow.commit()
    yield postgres_url
    leftovers = _query(
        postgres_url, "SELECT datname FROM pg_database WHERE datname LIKE 'agents\\_%'"
    )[0]
    engine = create_engine(postgres_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        for (name,) in leftovers:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    engine.dispose()


def test_a_postgres_database_with_now_and_sequences_is_corrected_and_applied_by_the_cli(
    target: str, sqlite_url: str, tmp_path: Path
) -> None:
    """Run, correct and apply are separate processes: the correction goes through, and the
    real database gets exactly the rows the corrected plan made — the announcement kept
    with the timestamp it got when it ran, the new release with the id, time, random value
    and uuid the sandbox gave it, its audit line from the trigger (not fired twice) — and
    the sequences move past the ids the plan used."""
    action = tmp_path / "release.action.yaml"
    action.write_text(yaml.safe_dump(RELEASE))
    cli = Cli(sqlite_url, tmp_path)
    before = _rows(target)

    started = cli("plan", "use", str(action), "--automation-profile", "auto")
    assert started.returncode == 0, started.stderr
    plan_id = heading_plan_id(started.stdout)
    assert _rows(target) == before  # nothing lands before Apply
    ran = _rows(_sandbox_work_database(target))
    announcement = ran["notes"][0]
    assert "coming soon" in announcement
    record = _decision(cli, plan_id, "a minor release")

    corrected = cli(
        "plan", "correct", record["decision_id"], "--mode=revert",
        "--guidance", "a major release", "--yes", "--format=json",
    )  # fmt: skip
    assert corrected.returncode == 0, corrected.stderr
    correction_id = json.loads(corrected.stdout)["correction"]["correction_id"]
    assert _decision(cli, plan_id, "a major release")["superseded_by"] is None
    made = _rows(_sandbox_work_database(target))
    diff = cli("plan", "diff", "--correction", correction_id)
    assert diff.returncode == 0, diff.stderr

    applied = cli("plan", "apply", plan_id)
    assert applied.returncode == 0, applied.stdout + applied.stderr

    after = _rows(target)
    assert after == made  # every value as the corrected plan made it in its sandbox
    assert after["notes"][0] == announcement  # the kept decision's now(), not re-generated
    assert [row.split(",")[1] for row in after["releases"]] == ["1.0.0", "2.0.0"]
    assert [row.split(",")[1] for row in after["audit"]] == ['"release 2.0.0"']
    assert [row.split(",")[1] for row in after["notes"]] == ['"coming soon"', "released"]
    assert "2.0.0" in diff.stdout and "1.1.0" in diff.stdout
    # The ids the plan used are not handed out again.
    nexts = _query(
        target,
        "INSERT INTO releases (version) VALUES ('2.0.1') RETURNING id",
        "SELECT id FROM audit WHERE what = 'release 2.0.1'",
        "INSERT INTO notes (body) VALUES ('later') RETURNING id",
    )
    assert [rows[0][0] for rows in nexts] == [3, 2, 3]
    show = cli("plan", "show", plan_id, "--format=json")
    assert json.loads(show.stdout)["plan"]["state"] == "applied", show.stdout
    # Discarding the plan drops the sandbox's databases from the server (checkpoints kept
    # for diffs until then).
    assert _sandbox_databases(target)
    discarded = cli("plan", "discard", plan_id, "--yes")
    assert discarded.returncode == 0, discarded.stderr
    assert _sandbox_databases(target) == []


def test_a_postgres_apply_that_conflicts_fails_in_one_line_and_lands_nothing(
    target: str, sqlite_url: str, tmp_path: Path
) -> None:
    """Someone adds release id 2 to the real database while the plan waits at its Apply
    gate (its trigger writes audit line 1 there): the plan's own rows cannot land. Apply
    says so in one line and exits 3 (refused); the real database keeps exactly what it had
    (no announcement, audit line or note half-landed)."""
    action = tmp_path / "release.action.yaml"
    action.write_text(yaml.safe_dump(RELEASE))
    cli = Cli(sqlite_url, tmp_path)
    started = cli("plan", "use", str(action), "--automation-profile", "auto")
    assert started.returncode == 0, started.stderr
    plan_id = heading_plan_id(started.stdout)
    assert _dry_run_refusal(cli, plan_id) is None
    _query(target, "INSERT INTO releases (id, version) VALUES (2, 'hotfix')")
    before = _rows(target), _rows(_sandbox_work_database(target)), _sandbox_databases(target)
    foreseen = _dry_run_refusal(cli, plan_id)  # read only: nothing locked, nothing written
    assert (_rows(target), _rows(_sandbox_work_database(target))) == before[:2]
    assert _sandbox_databases(target) == before[2]

    applied = cli("plan", "apply", plan_id)

    assert applied.returncode == CONSTRAINED_EXIT, applied.stdout + applied.stderr
    lines = applied.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was applied to rel/app-db" in lines[0], lines
    assert "row 1 of table audit changed" in lines[0], lines[0]  # tables in name order
    assert foreseen is not None and foreseen in lines[0]  # as the dry run said
    assert _rows(target) == before[0]


def _dry_run_refusal(cli: Cli, plan_id: str) -> str | None:
    """What ``plan apply --dry-run`` says of rel/app-db: why Apply would refuse it, or None."""
    shown = cli("plan", "apply", plan_id, "--dry-run", "--format=json")
    assert shown.returncode == 0, shown.stderr
    [resource] = [r for p in json.loads(shown.stdout)["plans"] for r in p["resources"]]
    assert resource["resource_id"] == "rel/app-db" and resource["changes"]
    refusal: str | None = resource["refusal"]
    return refusal
