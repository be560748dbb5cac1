"""Corrections that cannot be made, or that fail half-way, as `agents plan correct` and
`agents doctor` tell a user: refused up front in one line (exit 2) with nothing changed, or
recorded as what they are, never as succeeded."""

from __future__ import annotations

import gc
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui import failpoints
from tests.cli.conftest import Run
from tests.support.run_lease import held_by_another_thread


def _dump(db: Path) -> list[str]:
    """Every row of the store (and its schema), as SQL."""
    with sqlite3.connect(db) as connection:
        return list(connection.iterdump())


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of the sandboxes. Collected first: a git sandbox object of an earlier
    command of this process deletes its commit draft file when it is collected."""
    gc.collect()
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def sandboxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "sandboxes"
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(folder))
    return folder


@pytest.fixture
def demo(run: Run, tmp_path: Path, sandboxes: Path) -> dict[str, str]:
    """The demo plan at its Apply gate; ids of its plan and its strategy decision."""
    doc = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    tree = json.loads(run("plan", "tree", doc["plan_id"], "--format=json").output)
    keys = {d["chosen_option"]: d["decision_id"] for d in tree["decisions"]}
    return {"plan": doc["plan_id"], "strategy": keys["A plain function registered in COMMANDS"]}


def _plan(run: Run, plan_id: str) -> dict[str, Any]:
    doc = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("mode", ["revert", "append"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_sample_without_a_stored_action_is_refused_up_front_and_nothing_changes(
    run: Run,
    sample: dict[str, str],
    tmp_path: Path,
    sandboxes: Path,
    mode: str,
    dry_run: bool,
) -> None:
    db = tmp_path / "agents.db"
    before, files = _dump(db), _files(sandboxes)
    args = ["plan", "correct", sample["impl"], f"--mode={mode}", "--guidance", "use argparse"]
    result = run(*args, *(["--dry-run"] if dry_run else ["--yes"]))
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert f"plan {sample['plan']} cannot be corrected: it has no stored action" in line
    assert "neither a revert nor an append" in line and "`agents demo`" in line
    assert result.stdout == ""  # no impact printed for a correction that cannot be made
    assert _dump(db) == before and _files(sandboxes) == files
    shown = _plan(run, sample["plan"])
    assert shown["plan"]["state"] == "awaiting_approval"
    assert [c["status"] for c in shown["corrections"]] == ["succeeded"]  # the recorded one


def test_correcting_a_cancelled_plan_is_refused_in_one_line_and_nothing_changes(
    run: Run, demo: dict[str, str], tmp_path: Path, sandboxes: Path
) -> None:
    assert run("plan", "cancel", demo["plan"]).exit_code == 0
    db = tmp_path / "agents.db"
    before, files = _dump(db), _files(sandboxes)
    for extra in ("--dry-run", "--yes"):
        result = run(
            "plan", "correct", demo["strategy"], "--mode=revert", "--guidance", "a greeter", extra
        )
        assert result.exit_code == 2, result.output
        [line] = result.stderr.strip().splitlines()
        assert f"plan {demo['plan']} is cancelled: a cancelled plan cannot be corrected" in line
        assert "agents plan use" in line
    assert _dump(db) == before and _files(sandboxes) == files


def test_a_correction_whose_replay_fails_is_recorded_failed_and_plan_run_goes_on(
    run: Run, demo: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(failpoints.ENV_VAR, "record.decision@execute=raise")  # the replay fails
    failpoints.reset()
    result = run(
        "plan",
        "correct",
        demo["strategy"],
        "--mode=revert",
        "--yes",
        "--guidance",
        "use a greeter class so we can add languages",
    )
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()
    assert result.exit_code == 1, result.output
    assert ": failed (attempt 2)" in result.output
    assert "its replay failed: " in result.output
    assert f"go on with `agents plan run {demo['plan']}`" in result.output
    shown = _plan(run, demo["plan"])
    [correction] = shown["corrections"]
    assert correction["status"] == "failed" and correction["replacement_decision_id"]
    assert shown["plan"]["state"] == "errored"
    doctor = run("doctor")  # errored, as its correction failed: nothing is left running
    assert doctor.exit_code == 0, doctor.output

    resumed = run("plan", "run", demo["plan"])  # what the message says to do
    assert resumed.exit_code == 0, resumed.output
    assert "execute · awaiting_approval · attempt 2" in resumed.output.splitlines()[0]
    tree = json.loads(run("plan", "tree", demo["plan"], "--format=json").output)
    assert "A greeter class with a configurable greeting" in {
        d["chosen_option"] for d in tree["decisions"]
    }
    assert run("doctor").exit_code == 0


def test_doctor_reports_a_plan_left_running_and_repair_pauses_it(
    run: Run, tmp_path: Path, sandboxes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(failpoints.ENV_VAR, "record.decision@execute=raise")  # the run dies
    failpoints.reset()
    with pytest.raises(failpoints.InjectedFault):
        run("demo", "--dir", str(tmp_path / "demo"))
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()
    plans = json.loads(run("plan", "list", "--format=json").output)["plans"]
    [plan] = [p for p in plans if p["parent_plan_id"] is None]
    plan_id = plan["plan_id"]
    assert (plan["phase"], plan["state"]) == ("execute", "running")

    with held_by_another_thread(sandboxes, plan_id, "running"):  # a live runner: no problem
        assert run("doctor").exit_code == 0
        repair = run("doctor", "--repair")
        assert repair.exit_code == 0 and "repaired" not in repair.output
    doctor = run("doctor")
    assert doctor.exit_code == 1
    [line] = [x for x in doctor.output.splitlines() if x.startswith("left-running:")]
    assert f"plan {plan_id} is execute · running, but no process is running it" in line
    assert "agents plan run PLAN" in line and "agents doctor --repair" in line

    repaired = run("doctor", "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert f"repaired: plan {plan_id}, left running with no process running it" in repaired.output
    assert _plan(run, plan_id)["plan"]["state"] == "paused"
    resumed = run("plan", "run", plan_id)
    assert resumed.exit_code == 0, resumed.output
    assert "execute · awaiting_approval" in resumed.output.splitlines()[0]
    assert run("doctor").exit_code == 0
