"""`agents plan edit-strategy`: change the strategy of a plan waiting before Execute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Run

PLAIN = "A plain function registered in COMMANDS"
CLASS = "A greeter class with a configurable greeting"


@pytest.fixture
def supervised(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The demo plan under `supervised`: Strategize runs, then it waits at "Start Execute?"."""
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    doc = json.loads(
        run(
            "demo",
            "--dir",
            str(tmp_path / "demo"),
            "--automation-profile",
            "supervised",
            "--format=json",
        ).output
    )
    return {"plan": doc["plan_id"], **_decisions(run, doc["plan_id"])}


def _decisions(run: Run, plan_id: str) -> dict[str, str]:
    tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)
    return {d["chosen_option"]: d["decision_id"] for d in tree["decisions"]}


def _plan(run: Run, plan_id: str) -> dict[str, object]:
    return json.loads(run("plan", "show", plan_id, "--format=json").output)["plan"]  # type: ignore[no-any-return]


def test_the_edit_replaces_the_strategy_and_asks_the_execute_gate_again(
    run: Run, supervised: dict[str, str]
) -> None:
    before = _plan(run, supervised["plan"])
    assert (before["phase"], before["state"]) == ("strategize", "awaiting_approval")
    [asked_before] = _pending(run, supervised["plan"])
    result = run(
        "plan",
        "edit-strategy",
        supervised[PLAIN],
        "--to",
        "a greeter class, so we can add languages",
        "--as",
        "ana",
    )
    assert result.exit_code == 0, result.output
    assert "correction " in result.output and "succeeded" in result.output
    after = _plan(run, supervised["plan"])
    assert (after["phase"], after["state"], after["attempt"]) == (
        "strategize",
        "awaiting_approval",
        2,
    )
    current = _decisions(run, supervised["plan"])
    assert CLASS in current and PLAIN not in current  # decided again under the edit
    history = json.loads(
        run("plan", "tree", supervised["plan"], "--show-superseded", "--format=json").output
    )
    old = next(d for d in history["decisions"] if d["chosen_option"] == PLAIN)
    assert old["superseded_by"]  # the old choice stays in the history
    [asked_after] = _pending(run, supervised["plan"])  # the gates are asked again
    assert asked_after["question"] == asked_before["question"]
    assert asked_after["approval_id"] != asked_before["approval_id"]
    # and the edit's output names it, with the command that answers it as the same person;
    # it ended at the plan's heading, and the user had to find the question
    approve = f"agents approval approve {asked_after['approval_id']} --as ana"
    assert f"  waiting for: {asked_after['question']}  ({approve})" in result.output
    tree = run("plan", "tree", supervised["plan"]).output
    assert tree.rstrip().endswith("(1 superseded decision hidden; --show-superseded shows them)")


def test_an_execute_decision_or_a_plan_in_execute_is_refused_and_nothing_changes(
    run: Run, supervised: dict[str, str], tmp_path: Path
) -> None:
    invariant = supervised["Keep the public API of hello_cli unchanged"]
    _run_into_execute(run, supervised["plan"])
    in_execute = _plan(run, supervised["plan"])
    assert in_execute["phase"] == "execute"
    result = run("plan", "edit-strategy", invariant, "--to", "anything")
    assert result.exit_code == 2
    assert "its strategy can only be edited before Execute starts" in result.output
    assert "agents plan correct" in result.output
    assert _plan(run, supervised["plan"]) == in_execute
    execute_decision = _first_execute_decision(run, supervised["plan"])
    result = run("plan", "edit-strategy", execute_decision, "--to", "anything")
    assert result.exit_code == 2 and "not part of the strategy" in result.output


def _pending(run: Run, plan_id: str) -> list[dict[str, object]]:
    approvals = json.loads(run("approval", "list", "--format=json").output)
    return [a for a in approvals["approvals"] if a["plan_id"] == plan_id]


def _run_into_execute(run: Run, plan_id: str) -> None:
    """Approve every gate until the plan is in Execute."""
    for _ in range(5):
        if _plan(run, plan_id)["phase"] == "execute":
            return
        for approval in _pending(run, plan_id):
            assert run("approval", "approve", str(approval["approval_id"])).exit_code == 0
        run("plan", "run", plan_id)
    raise AssertionError("the plan never reached Execute")


def _first_execute_decision(run: Run, plan_id: str) -> str:
    """Approve what the plan (and its child) ask until Execute has made a decision."""
    for _ in range(8):
        tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)
        made = [d["decision_id"] for d in tree["decisions"] if d["phase"] == "execute"]
        if made:
            return str(made[0])
        approvals = json.loads(run("approval", "list", "--format=json").output)["approvals"]
        for approval in approvals:
            run("approval", "approve", str(approval["approval_id"]))
        run("plan", "run", plan_id)
    raise AssertionError("Execute never made a decision")


def test_a_dry_run_names_who_the_edit_would_be_requested_by(
    run: Run, supervised: dict[str, str]
) -> None:
    """`--dry-run --as NAME`: the preview says NAME would request the edit (no warnings
    before Execute: nothing to confirm), and JSON gives `requested_by`; the real edit with
    the same `--as` records NAME."""
    args = ("plan", "edit-strategy", supervised[PLAIN], "--to", "a greeter class", "--dry-run")
    shown = run(*args, "--as", "Ann O'Neil")
    assert shown.exit_code == 0, shown.output
    assert shown.output.endswith("\nthe correction would be requested by Ann O'Neil\n")
    doc = json.loads(run(*args, "--as", "Ann O'Neil", "--format=json").output)
    assert (doc["warnings"], doc["requested_by"]) == ([], "Ann O'Neil")
    assert run(*args[:-1], "--as", "Ann O'Neil").exit_code == 0
    corrections = json.loads(run("plan", "show", supervised["plan"], "--format=json").output)
    assert [c["requested_by"] for c in corrections["corrections"]] == ["Ann O'Neil"]
