"""`agents plan correct --mode=append` says what an append does (issue 14, finding 5): no
decision superseded, the appended plan and its work, the sandboxes it works in, and the
irreversible effects that work repeats, as a warning to confirm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from tests.cli.conftest import Run


@pytest.fixture
def demo_plan(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    doc = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    tree = json.loads(run("plan", "tree", doc["plan_id"], "--format=json").output)
    keys = {d["chosen_option"]: d["decision_id"] for d in tree["decisions"]}
    return {
        "plan": doc["plan_id"],
        "announce": keys["Notify #hello-cli"],
        "strategy": keys["A plain function registered in COMMANDS"],
        "outbox": str(tmp_path / "demo" / "team-chat" / "outbox.jsonl"),
        "db": str(tmp_path / "agents.db"),
    }


def corrections(run: Run, plan_id: str) -> list[object]:
    doc = json.loads(run("plan", "show", plan_id, "--format=json").output)
    found = doc["corrections"]
    assert isinstance(found, list)
    return found


def test_the_dry_run_says_what_the_appended_plan_does(run: Run, demo_plan: dict[str, str]) -> None:
    plan = demo_plan["plan"]
    result = run(
        "plan", "correct", demo_plan["strategy"], "--mode=append",
        "--guidance", "use a greeter class", "--dry-run",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.output
    assert "no decision superseded, nothing rolled back" in out
    assert "superseded and re-made" not in out
    assert "1. strategy (strategize): A greeter class with a configurable greeting" in out
    assert "2. implement-class (execute): hello_cli/greet.py with a Greeter class" in out
    assert f"works in\n  the sandboxes of plan {plan}" in out
    assert "WARNING" not in out  # its work triggers no irreversible effect
    assert corrections(run, plan) == []


def test_an_append_that_repeats_a_notification_asks_first(
    run: Run, demo_plan: dict[str, str]
) -> None:
    args = ("plan", "correct", demo_plan["announce"], "--mode=append", "--guidance", "again")
    dry = run(*args, "--choose", "1", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "1. announce (execute): Notify #hello-cli — local/notify" in dry.output
    assert "irreversible effects it repeats\n  ⚠ local/notify (1 invocation)" in dry.output
    assert "WARNING: The appended plan repeats work that triggers" in dry.output
    sent = len(Path(demo_plan["outbox"]).read_text("utf-8").splitlines())
    declined = CliRunner().invoke(
        cli, ["--db", demo_plan["db"], *args, "--choose", "1"], input="n\n"
    )
    assert declined.exit_code == 1
    assert len(Path(demo_plan["outbox"]).read_text("utf-8").splitlines()) == sent
    assert corrections(run, demo_plan["plan"]) == []


def test_an_append_to_an_applied_plan_says_how_to_land_it(
    run: Run, demo_plan: dict[str, str]
) -> None:
    plan = demo_plan["plan"]
    assert run("plan", "apply", plan).exit_code == 0
    result = run(
        "plan", "correct", demo_plan["strategy"], "--mode=append",
        "--guidance", "use a greeter class", "--yes",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "works in\n  sandboxes of its own, made from the real resources" in result.output
    [done] = corrections(run, plan)
    assert isinstance(done, dict)
    appended = done["appended_plan_id"]
    assert f"land it: agents plan apply {appended}" in result.output
    landed = run("plan", "apply", appended)
    assert landed.exit_code == 0, landed.output
    assert "apply · applied" in landed.output


def test_pausing_an_applied_plan_names_its_appended_plan_that_runs(
    run: Run, demo_plan: dict[str, str], tmp_path: Path
) -> None:
    """An applied plan cannot be paused; while a plan appended to it runs (here: the
    command that ran it was killed mid-run, leaving it `running`), `plan pause` of the
    applied plan names the plan to pause. It used to say only that an applied plan cannot
    be paused, as if nothing ran."""
    plan = demo_plan["plan"]
    assert run("plan", "apply", plan).exit_code == 0
    killed = subprocess.run(
        [
            sys.executable, "-m", "cleveragents_tui", "--db", demo_plan["db"],
            "plan", "correct", demo_plan["strategy"], "--mode=append",
            "--guidance", "use a greeter class", "--yes",
        ],
        env={**os.environ, "AGENTS_FAILPOINTS": "record.decision=kill"},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    appended = next(
        p["plan_id"]
        for p in json.loads(run("plan", "list", "--format=json").output)["plans"]
        if p["parent_plan_id"] == plan and p["state"] != "applied"  # not the demo's child
    )
    refused = run("plan", "pause", plan)
    assert refused.exit_code == 2
    assert refused.output.splitlines() == [
        f"error: plan {plan} is applied: it cannot be paused: its appended plan runs; "
        f"pause that: agents plan pause {appended}"
    ]
    paused = run("plan", "pause", appended)
    assert paused.exit_code == 0, paused.output
    assert f"paused: go on with agents plan run {appended}" in paused.output
    went_on = run("plan", "run", appended)
    assert f"land it: agents plan apply {appended}" in went_on.output
    assert run("plan", "apply", appended).exit_code == 0
