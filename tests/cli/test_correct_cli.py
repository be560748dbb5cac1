"""`agents plan correct` and `agents plan diff --correction` as a user drives them."""

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
        "record": keys["A row in the releases table"],
        "strategy": keys["A plain function registered in COMMANDS"],
        "db": str(tmp_path / "agents.db"),
    }


def test_dry_run_prints_the_impact_and_the_warnings_and_changes_nothing(
    run: Run, demo_plan: dict[str, str]
) -> None:
    result = run(
        "plan",
        "correct",
        demo_plan["record"],
        "--mode=revert",
        "--guidance",
        "record rc1",
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    assert "rollback tier: full decision-level" in result.output
    assert "irreversible: local/notify (1 invocation(s))" in result.output
    assert "WARNING: Rolling back past this decision undoes work that triggered" in result.output
    doc = json.loads(
        run(
            "plan",
            "correct",
            demo_plan["record"],
            "--mode=revert",
            "--guidance",
            "x",
            "--dry-run",
            "--format=json",
        ).output
    )
    assert (
        doc["format"] == "cleveragents.correction-preview/1"
        and doc["tier"] == "full decision-level"
    )
    assert (
        json.loads(run("plan", "show", demo_plan["plan"], "--format=json").output)["corrections"]
        == []
    )


def test_answering_no_cancels_and_yes_corrects(demo_plan: dict[str, str]) -> None:
    args = [
        "--db",
        demo_plan["db"],
        "plan",
        "correct",
        demo_plan["record"],
        "--mode=revert",
        "--guidance",
        "record rc1",
    ]
    refused = CliRunner().invoke(cli, args, input="n\n")
    assert refused.exit_code == 1
    assert "Correction cancelled: nothing was changed." in refused.stderr
    accepted = CliRunner().invoke(cli, args, input="y\ny\n")  # two warnings: none + irreversible
    assert accepted.exit_code == 0, accepted.output
    assert "correction " in accepted.output and ": succeeded (attempt 2)" in accepted.output
    correction_id = accepted.output.split("correction ")[-1].split(":")[0].strip()
    diff = CliRunner().invoke(
        cli, ["--db", demo_plan["db"], "plan", "diff", "--correction", correction_id]
    )
    assert diff.exit_code == 0, diff.output
    assert "- tool_invocation: A row in the releases table" in diff.output


def test_a_strategy_correction_with_yes_replays_and_the_diff_shows_the_new_code(
    run: Run, demo_plan: dict[str, str]
) -> None:
    result = run(
        "plan",
        "correct",
        demo_plan["strategy"],
        "--mode=revert",
        "--yes",
        "--guidance",
        "use a greeter class so we can add languages",
    )
    assert result.exit_code == 0, result.output
    correction_id = result.output.split("compare the attempts: agents plan diff --correction ")[
        1
    ].strip()
    diff = run("plan", "diff", "--correction", correction_id)
    assert "+ strategy_choice: A greeter class with a configurable greeting" in diff.output
    assert "+class Greeter:" in diff.output
    assert "-def hello(name: str) -> str:" in diff.output


def test_errors_are_one_line(run: Run, demo_plan: dict[str, str]) -> None:
    bad = run("plan", "correct", "nope", "--mode=revert", "--guidance", "x")
    assert bad.exit_code == 2 and "not a valid ULID" in bad.stderr
    root = json.loads(run("plan", "show", demo_plan["plan"], "--format=json").output)[
        "root_decision_id"
    ]
    refused = run("plan", "correct", root, "--mode=revert", "--guidance", "x")
    assert refused.exit_code == 2 and "prompt_definition" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
