"""Errors people can cause: one clear line on stderr, exit code 2, no traceback, nothing changed."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from cleveragents_tui.store.database import make_engine, normalise_url
from tests.cli.conftest import Run


def _one_line_error(result, *fragments: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("bad", ["not-a-ulid", "01HXM4-!!", "01HI"])
def test_malformed_ids(run: Run, sample: dict[str, str], bad: str) -> None:
    _one_line_error(run("plan", "tree", bad), "not a valid ULID")
    _one_line_error(run("plan", "explain", bad), "not a valid ULID")


def test_unknown_plan_and_decision(run: Run, sample: dict[str, str]) -> None:
    _one_line_error(
        run("plan", "show", "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        "plan 01ARZ3NDEKTSV4RRFFQ69G5FAV does not exist",
        "agents plan list",
    )
    _one_line_error(run("plan", "explain", "01ARZ3NDEKTSV4RRFFQ69G5FAV"), "does not exist")
    _one_line_error(run("plan", "tree", "7ZZZZ"), "no plan starts with 7ZZZZ")


def test_decision_of_another_plan(run: Run, sample: dict[str, str]) -> None:
    _one_line_error(
        run("plan", "explain", sample["impl"], "--plan", sample["child"]),
        f"belongs to plan {sample['plan']}, not {sample['child']}",
    )


def test_ambiguous_prefix(run: Run, sample: dict[str, str]) -> None:
    _one_line_error(
        run("plan", "explain", sample["impl"][:4]), "matches more than one", "give more characters"
    )


def test_invalid_json_in_a_row(run: Run, sample: dict[str, str], tmp_path: Path) -> None:
    engine = make_engine(normalise_url(str(tmp_path / "agents.db")))
    with engine.begin() as connection:
        row = dict(
            connection.execute(
                text("SELECT * FROM decisions WHERE decision_id = :d"), {"d": sample["impl"]}
            )
            .mappings()
            .one()
        )
        row.update(
            decision_id="01ARZ3NDEKTSV4RRFFQ69G5FAV",
            sequence_number=999,
            alternatives_considered="[broken",
        )
        columns = ", ".join(row)
        connection.execute(
            text(f"INSERT INTO decisions ({columns}) VALUES ({', '.join(':' + c for c in row)})"),
            row,
        )
    engine.dispose()
    _one_line_error(
        run("plan", "explain", "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        "decisions row 01ARZ3NDEKTSV4RRFFQ69G5FAV: column alternatives_considered holds invalid JSON",
        "agents doctor",
    )


def test_a_row_with_an_unknown_enum_value(run: Run, sample: dict[str, str], tmp_path: Path) -> None:
    engine = make_engine(normalise_url(str(tmp_path / "agents.db")))
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE plans SET state = 'exploded' WHERE plan_id = :p"), {"p": sample["child"]}
        )
    engine.dispose()
    _one_line_error(
        run("plan", "show", sample["child"]), f"plans row {sample['child']}: state is invalid"
    )


def test_bad_database_urls(run: Run, tmp_path: Path) -> None:
    _one_line_error(run("plan", "list", db_url="mysql://x@y/z"), "is not supported")
    _one_line_error(
        run("plan", "list", db_url=str(tmp_path / "no" / "such" / "dir.db")), "does not exist"
    )
    _one_line_error(
        run("plan", "list", db_url=f"postgresql://nobody@/x?host={tmp_path}&port=1"),
        "cannot open",
        "--db URL",
    )


def test_bad_input_leaves_the_store_unchanged(
    run: Run, sample: dict[str, str], tmp_path: Path
) -> None:
    db = tmp_path / "agents.db"
    engine = make_engine(normalise_url(str(db)))

    def digest() -> str:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT * FROM decisions ORDER BY decision_id")).all()
            plans = connection.execute(text("SELECT * FROM plans ORDER BY plan_id")).all()
        return hashlib.sha256(repr((rows, plans)).encode()).hexdigest()

    before = digest()
    run("plan", "explain", "garbage")
    run("plan", "explain", sample["impl"], "--plan", sample["child"])
    run("plan", "tree", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert digest() == before
    engine.dispose()


def test_the_installed_command_exits_2_without_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTS_DATABASE_URL": str(tmp_path / "a.db")}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from cleveragents_tui.cli import main; main()",
            "plan",
            "tree",
            "nope",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: plan 'nope' is not a valid ULID or ULID prefix: "
        "give the 26-character id or at least 4 of its first characters"
    )


def test_a_path_holding_a_newline_is_named_on_the_one_line(run: Run, tmp_path: Path) -> None:
    """A folder named with a newline split the error in two lines (the second a bare
    fragment of the path); it is shown escaped, as the tree and tables show such text."""
    folder = tmp_path / "new\nline"
    folder.mkdir()
    missing = folder / "x.db"
    _one_line_error(
        run("resource", "add", "db", "--kind", "database", "--location", str(missing)),
        f"error: location {tmp_path}/new\\nline/x.db does not exist",
    )
