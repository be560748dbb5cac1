"""`agents plan correct --mode=append` says what an append does (issue 14, finding 5): no
decision superseded, the appended plan and its work, the sandboxes it works in, and the
irreversible effects that work repeats, as a warning to confirm."""

from __future__ import annotations

import json
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
