"""A bad environment — a read-only or vanished database, a full disk, a database that keeps
nothing — is one line naming the problem and the fix, exit code 2, and nothing lost
(issue 21, item 4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import event

from cleveragents_tui.domain.errors import DatabaseUnavailableError
from cleveragents_tui.engine.demo.demo_data import load_sample_plan
from cleveragents_tui.store.store import Store
from tests.cli.conftest import Run


def one_line_error(output: str, *fragments: str) -> None:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def plan_ids(run: Run) -> list[str]:
    result = run("plan", "list", "--format=json")
    assert result.exit_code == 0, result.output
    return [p["plan_id"] for p in json.loads(result.output)["plans"]]


def test_a_read_only_database_is_one_line_and_unchanged(run: Run, tmp_path: Path) -> None:
    assert run("demo-data").exit_code == 0
    before = plan_ids(run)
    # SQLite's read-only mode: the same refusal a read-only file gives (root ignores chmod)
    read_only = f"sqlite:///file:{tmp_path / 'agents.db'}?mode=ro&uri=true"
    result = run("demo-data", db_url=read_only)
    assert result.exit_code == 2
    one_line_error(result.output, "is read-only", "make the file and its folder writable")
    assert plan_ids(run) == before
    assert run("plan", "list", db_url=read_only).exit_code == 0  # reading still works


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_file_is_one_line(run: Run, tmp_path: Path) -> None:
    assert run("demo-data").exit_code == 0
    for name in ("agents.db", "agents.db-wal", "agents.db-shm"):
        if (tmp_path / name).exists():
            (tmp_path / name).chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        result = run("demo-data")
    finally:
        tmp_path.chmod(0o755)
    assert result.exit_code == 2
    one_line_error(result.output, "agents.db")


def test_a_missing_folder_is_one_line(run: Run, tmp_path: Path) -> None:
    result = run("plan", "list", db_url=str(tmp_path / "nowhere" / "agents.db"))
    assert result.exit_code == 2
    one_line_error(result.output, "does not exist", "create the folder")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "url", ["sqlite://", ":memory:", "sqlite:///:memory:", "sqlite:///file::memory:?uri=true"]
)
def test_an_in_memory_database_is_refused(run: Run, url: str) -> None:
    result = run("demo-data", db_url=url)
    assert result.exit_code == 2
    one_line_error(result.output, "in-memory database: nothing would be kept", "--db ./agents.db")


def test_a_full_disk_fails_the_correction_in_one_line(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    doc = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    plan_id = doc["plan_id"]
    tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)
    record = next(
        d["decision_id"]
        for d in tree["decisions"]
        if d["chosen_option"] == "A row in the releases table"
    )
    monkeypatch.setenv("AGENTS_FAILPOINTS", "fs.write=full")  # the replay's file writes
    result = run(
        "plan",
        "correct",
        record,
        "--mode=revert",
        "--guidance",
        "record rc1",
        "--choose",
        "1",
        "--yes",
    )
    monkeypatch.delenv("AGENTS_FAILPOINTS")
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    error = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert error == [
        "error: No space left on device (injected at fs.write): free some space, then run "
        "`agents doctor`"
    ]
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert [c["status"] for c in shown["corrections"]] == ["failed"]  # not left running
    doctor = run("doctor")
    assert doctor.exit_code == 0, doctor.output


def test_a_full_disk_under_the_database_is_one_error_and_keeps_the_store(
    tmp_path: Path,
) -> None:
    store = Store.open(str(tmp_path / "agents.db"))
    try:
        load_sample_plan(store)

        @event.listens_for(store.engine, "connect")
        def _cap(dbapi_connection: object, _record: object) -> None:  # SQLite's own "full"
            dbapi_connection.execute("PRAGMA max_page_count = 1")  # type: ignore[attr-defined]

        store.engine.dispose()
        with pytest.raises(DatabaseUnavailableError) as raised:
            load_sample_plan(store)
        assert str(raised.value) == (
            f"the disk holding the database {tmp_path / 'agents.db'} is full: free some "
            "space, then run `agents doctor`"
        )
    finally:
        store.close()
    store = Store.open(str(tmp_path / "agents.db"))
    try:
        with store.unit_of_work() as uow:
            assert len([p for p in uow.plans.all() if p.parent_plan_id is None]) == 1
    finally:
        store.close()


def test_a_database_deleted_in_use_is_refused_not_written_to_nowhere(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    store = Store.open(str(path))
    try:
        load_sample_plan(store)
        for name in ("agents.db", "agents.db-wal", "agents.db-shm"):
            (tmp_path / name).unlink(missing_ok=True)
        with pytest.raises(DatabaseUnavailableError) as raised:
            load_sample_plan(store)
        assert "was moved or deleted while in use" in str(raised.value)
        assert "\n" not in str(raised.value)
    finally:
        store.close()
    assert not path.exists()  # nothing was recreated in its place


def test_a_long_id_is_cut_in_the_message(run: Run) -> None:
    for command in ("show", "tree"):
        result = run("plan", command, "Z" * 100_000)
        assert result.exit_code == 2
        one_line_error(result.output, "'" + "Z" * 40 + "…'")
        assert len(result.output) < 300
