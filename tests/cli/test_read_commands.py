"""The read-only CLI on the sample plan: what people see, and the stable JSON documents."""

from __future__ import annotations

import json

from tests.cli.conftest import Run


def test_plan_list_shows_plans_with_children_nested(run: Run, sample: dict[str, str]) -> None:
    out = run("plan", "list").output
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["PLAN", "ACTION", "PHASE", "STATE"]
    top = next(i for i, line in enumerate(lines) if line.startswith(sample["plan"]))
    assert (
        "local/add-greeting" in lines[top]
        and "awaiting_approval" in lines[top]
        and "12/14" in lines[top]
    )
    assert lines[top + 1].startswith(sample["child"]) and "└ local/write-docs" in lines[top + 1]


def test_plan_list_json_document(run: Run, sample: dict[str, str]) -> None:
    doc = json.loads(run("plan", "list", "--format=json").output)
    assert doc["format"] == "cleveragents.plan-list/1"
    top = next(p for p in doc["plans"] if p["plan_id"] == sample["plan"])
    assert {
        k: top[k]
        for k in (
            "phase",
            "state",
            "attempt",
            "automation_profile",
            "decision_count",
            "current_decision_count",
            "depth",
        )
    } == {
        "phase": "execute",
        "state": "awaiting_approval",
        "attempt": 2,
        "automation_profile": "cautious",
        "decision_count": 14,
        "current_decision_count": 12,
        "depth": 0,
    }


def test_global_format_option_applies_to_every_command(run: Run, sample: dict[str, str]) -> None:
    doc = json.loads(run("--format", "json", "plan", "show", sample["plan"]).output)
    assert doc["format"] == "cleveragents.plan/1"
    assert doc["decisions_by_type"]["tool_invocation"] == 3
    assert [c["plan_id"] for c in doc["children"]] == [sample["child"]]
    assert doc["corrections"][0]["mode"] == "revert"


def test_plan_show_text(run: Run, sample: dict[str, str]) -> None:
    out = run("plan", "show", sample["plan"]).output
    assert "12 current, 2 superseded" in out
    assert "revert of " + sample["superseded"] in out
    assert sample["child"] in out


def test_the_recorded_sample_is_not_offered_a_run(run: Run, sample: dict[str, str]) -> None:
    """The sample waits at its Apply gate with no question and no action to run: `plan show`
    said `nothing left to answer, go on with agents plan run P`, which then failed with "has
    no stored action"."""
    assert "approvals    0 pending\n" in run("plan", "show", sample["plan"]).output
    assert "agents plan run" not in run("plan", "list").output
    assert run("approval", "list").output.strip() == "No pending approvals."
    changed = run("plan", "set-profile", sample["plan"], "auto")  # a command's result line
    assert changed.exit_code == 0 and "agents plan run" not in changed.output, changed.output
    refused = run("plan", "run", sample["plan"])
    assert refused.exit_code == 2 and "has no stored action" in refused.stderr


def test_tree_hides_superseded_branches_unless_asked(run: Run, sample: dict[str, str]) -> None:
    out = run("plan", "tree", sample["plan"]).output
    assert sample["superseded"] not in out
    assert "(2 superseded decisions hidden; --show-superseded shows them)" in out
    full = run("plan", "tree", sample["plan"], "--show-superseded").output
    line = next(x for x in full.splitlines() if x.startswith(sample["superseded"]))
    assert "✗ strategy_choice: A synchronous handler that prints directly  (0.55)" in line
    assert "[superseded by " in line


def test_tree_lines_draw_the_structure_like_the_specification(
    run: Run, sample: dict[str, str]
) -> None:
    lines = run("plan", "tree", sample["plan"]).output.splitlines()
    body = [line.split("  ", 1)[1] for line in lines[1:] if line[:2] == "01"]
    assert body[0].startswith("prompt_definition: Add a `hello NAME` command")
    assert body[1].startswith("├── invariant_enforced: ")
    assert body[2].startswith("├── ↻ user_intervention: ")
    assert body[3].startswith("└── ↻ strategy_choice: An async handler")
    assert body[4].startswith("    ├── subplan_spawn: ")
    assert body[5].startswith("    └── implementation_choice: click")
    assert body[-1].startswith("        └── error_recovery: Retry once with backoff")


def test_tree_json_is_flat_in_display_order_with_depths(run: Run, sample: dict[str, str]) -> None:
    doc = json.loads(run("plan", "tree", sample["plan"], "--format=json").output)
    assert doc["format"] == "cleveragents.plan-tree/1"
    assert doc["hidden_superseded"] == 2 and doc["show_superseded"] is False
    decisions = doc["decisions"]
    assert [d["depth"] for d in decisions] == [0, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3, 3]
    assert set(decisions[0]) == {
        "decision_id",
        "parent_decision_id",
        "sequence_number",
        "decision_type",
        "phase",
        "chosen_option",
        "confidence_score",
        "is_correction",
        "corrects_decision_id",
        "superseded_by",
        "depth",
        "has_checkpoint",
    }


def test_explain_shows_question_choice_alternatives_rationale_confidence_and_impact(
    run: Run, sample: dict[str, str]
) -> None:
    out = run("plan", "explain", sample["impl"]).output
    assert "question      How should arguments be parsed?" in out
    assert "chosen        click, as the other commands do" in out
    assert "alternatives  argparse; typer" in out
    assert "confidence    0.74" in out
    assert "downstream impact" in out
    assert "artifact  src/hello_cli/commands/hello.py (source)" in out
    assert "  child  " in out and "tool_invocation: local/run-migration" in out


def test_explain_lists_irreversible_tool_invocations_and_supersession(
    run: Run, sample: dict[str, str]
) -> None:
    notify = run("plan", "explain", sample["notify"]).output
    assert "local/send-notification  (external:email)  ⚠ irreversible" in notify
    superseded = run("plan", "explain", sample["superseded"]).output
    # by the decision that replaced it, not by the correction that superseded it (issue 14)
    assert "superseded by " in superseded
    assert "strategy_choice: An async handler on the existing event loop" in superseded


def test_explain_marks_a_superseded_child_as_history(run: Run, sample: dict[str, str]) -> None:
    tree = json.loads(
        run("plan", "tree", sample["plan"], "--show-superseded", "--format=json").output
    )
    by_id = {d["decision_id"]: d for d in tree["decisions"]}
    old = by_id[sample["superseded"]]
    out = run("plan", "explain", old["parent_decision_id"]).output
    line = next(x for x in out.splitlines() if sample["superseded"] in x)
    assert line.startswith("  child  ✗ ") and f"[superseded by {old['superseded_by']}]" in line
    current = [x for x in out.splitlines() if x.startswith("  child  ") and "✗" not in x]
    assert current  # the decision that replaced it is listed as a plain child


def test_explain_json_carries_the_full_decision(run: Run, sample: dict[str, str]) -> None:
    doc = json.loads(run("plan", "explain", sample["impl"], "--format=json").output)
    assert doc["format"] == "cleveragents.decision/1"
    assert doc["decision"]["alternatives_considered"] == ["argparse", "typer"]
    assert doc["decision"]["artifacts_produced"] == [
        {"artifact_path": "src/hello_cli/commands/hello.py", "artifact_type": "source"}
    ]
    assert doc["plan"]["plan_id"] == sample["plan"]


def test_unique_prefixes_are_accepted(run: Run, sample: dict[str, str]) -> None:
    # ULIDs made in the same millisecond share a long prefix; the random tail is unique.
    result = run("plan", "show", sample["child"][:20])
    assert result.exit_code == 0, result.output
    assert "local/write-docs" in result.output


def test_empty_database_says_how_to_start(run: Run) -> None:
    assert "agents demo-data" in run("plan", "list").output
