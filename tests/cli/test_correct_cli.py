"""`agents plan correct` and `agents plan diff --correction` as a user drives them."""

from __future__ import annotations

import gc
import getpass
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.engine import plan_tree
from cleveragents_tui.views.impact import NAMED_AT_MOST, impact_view
from cleveragents_tui.views.sections import to_plain_text
from tests.cli.conftest import Run
from tests.support.scale_plan import build, revert_preview, target_near


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
    assert "rollback tier  full decision-level" in result.output
    assert "⚠ local/notify (1 invocation) — external:notification" in result.output
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


def test_a_dry_run_names_who_would_request_the_correction_and_confirm_its_warnings(
    run: Run, demo_plan: dict[str, str]
) -> None:
    """Who the correction would be requested by — `--as NAME`, else you — and so who
    confirms its warnings, stated before them; JSON gives it as `requested_by`."""
    args = ("plan", "correct", demo_plan["record"], "--mode=revert", "--guidance", "record rc1")
    named = run(*args, "--dry-run", "--as", "Ann O'Neil")
    assert named.exit_code == 0, named.output
    line = "\nthe correction would be requested by Ann O'Neil, who confirms the 2 warnings below\n"
    assert line in named.output
    assert named.output.index(line) < named.output.index("\nWARNING: ")
    mine = run(*args, "--dry-run")
    assert f"\nthe correction would be requested by {getpass.getuser()}, who " in mine.output
    doc = json.loads(run(*args, "--dry-run", "--as", "Ann O'Neil", "--format=json").output)
    assert (len(doc["warnings"]), doc["requested_by"]) == (2, "Ann O'Neil")
    assert list(doc)[-1] == "requested_by"
    hostile = run(*args, "--dry-run", "--as", "eve\nthe correction would be requested by bob")
    assert "requested by eve\\nthe correction would be requested by bob, who" in hostile.output


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
        "--choose",  # the one alternative: guidance alone cannot change it
        "1",
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
    diff = run("plan", "diff", "--correction", correction_id[:12])  # a prefix, as for any id
    assert diff.exit_code == 0, diff.output
    assert "+ strategy_choice: A greeter class with a configurable greeting" in diff.output
    assert "+class Greeter:" in diff.output
    assert "-def hello(name: str) -> str:" in diff.output


def test_plan_diff_of_a_plan_shows_its_latest_correction(
    run: Run, demo_plan: dict[str, str]
) -> None:
    """`agents plan diff PLAN` is the diff of the plan's latest correction; it used to be
    `Missing option '--correction'`, and the plan's id was the one a user had at hand."""
    plan = demo_plan["plan"]
    none_yet = run("plan", "diff", plan)
    assert none_yet.exit_code == 2
    assert none_yet.output.strip().splitlines() == [
        f"error: plan {plan} has no correction to compare: correct one of its decisions "
        'first: agents plan correct DECISION --mode=revert --guidance "..."'
    ]
    ids: list[str] = []
    for guidance in ("use a greeter class", "keep it a plain function"):
        corrected = run(
            "plan", "correct", demo_plan["strategy"] if not ids else _current_strategy(run, plan),
            "--mode=revert", "--yes", "--guidance", guidance,
        )  # fmt: skip
        assert corrected.exit_code == 0, corrected.output
        ids.append(corrected.output.split("agents plan diff --correction ")[1].strip())
    latest = run("plan", "diff", plan[:10])
    assert latest.exit_code == 0, latest.output
    assert latest.output == run("plan", "diff", "--correction", ids[-1]).output
    assert latest.output != run("plan", "diff", "--correction", ids[0]).output
    for given, said in [
        ((), "error: no correction named: give a plan (its latest correction) or --correction C"),
        ((plan, "--correction", ids[0]), "error: both a plan and --correction given: give one"),
    ]:
        refused = run("plan", "diff", *given)
        assert refused.exit_code == 2
        assert refused.output.strip().startswith(said), refused.output


def _current_strategy(run: Run, plan: str) -> str:
    tree = json.loads(run("plan", "tree", plan, "--format=json").output)["decisions"]
    strategy: str = next(d["decision_id"] for d in tree if d["decision_type"] == "strategy_choice")
    return strategy


def test_preview_and_execute_run_over_a_frozen_heap(run: Run, demo_plan: dict[str, str]) -> None:
    """The command freezes what it has loaded before the preview and again before the
    correction (fewer full collections); the preview, the correction, its replay and its
    report are the same over a frozen heap."""
    args = ["plan", "correct", demo_plan["record"], "--mode=revert", "--guidance", "record rc1"]
    assert gc.get_freeze_count() == 0
    dry = run(*args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert gc.get_freeze_count() > 0
    assert "rollback tier  full decision-level" in dry.output
    gc.unfreeze()
    result = run(*args, "--yes", "--choose", "1")
    assert result.exit_code == 0, result.output
    assert gc.get_freeze_count() > 0
    assert ": succeeded (attempt 2)" in result.output
    tree = json.loads(run("plan", "tree", demo_plan["plan"], "--format=json").output)
    assert "A row in the releases table" in {d["chosen_option"] for d in tree["decisions"]}


def test_the_dry_run_names_the_affected_set_as_the_plans_tree_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan correct --dry-run` names the affected decisions from their own rows, read by
    id (not the plan's whole tree, 30x the preview at ~0.5% of 10,000): the text is the one
    the plan's tree names them with, in the plan's order."""
    scale = build(tmp_path / "plan", 300)
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(scale.options.sandbox_base))
    target, size = target_near(scale, 0.4)
    impact = revert_preview(scale, target)
    named = {line.row.decision_id: line.row for line in plan_tree(scale.store, scale.plan_id).lines}
    expected = to_plain_text(impact_view(impact, named.get))
    scale.store.close()
    args = ["plan", "correct", target, "--mode=revert", "--guidance", "make it loud", "--dry-run"]
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "plan" / "agents.db"), *args])
    assert result.exit_code == 0, result.output
    assert 1 < size <= NAMED_AT_MOST  # every affected decision is named
    assert expected in result.output


def test_errors_are_one_line(run: Run, demo_plan: dict[str, str]) -> None:
    bad = run("plan", "correct", "nope", "--mode=revert", "--guidance", "x")
    assert bad.exit_code == 2 and "not a valid ULID" in bad.stderr
    root = json.loads(run("plan", "show", demo_plan["plan"], "--format=json").output)[
        "root_decision_id"
    ]
    refused = run("plan", "correct", root, "--mode=revert", "--guidance", "x")
    assert refused.exit_code == 2 and "prompt_definition" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def _sqlite_dump(db: str) -> list[str]:
    import sqlite3

    with sqlite3.connect(db) as connection:
        return list(connection.iterdump())


def test_guidance_that_selects_no_alternative_is_refused_and_changes_nothing(
    run: Run, demo_plan: dict[str, str]
) -> None:
    """Finding 3 of issue 14: the implementation choice has one alternative; a Greeter class
    is the strategy's to choose. Refused in one line naming both ways out; nothing changed."""
    tree = json.loads(run("plan", "tree", demo_plan["plan"], "--format=json").output)
    [implement] = [
        d["decision_id"] for d in tree["decisions"] if d["decision_type"] == "implementation_choice"
    ]
    before = _sqlite_dump(demo_plan["db"])
    guidance = "use a Greeter class in hello_cli/greeter.py"
    args = ("plan", "correct", implement, "--mode=revert", "--guidance", guidance)
    refused = run(*args, "--yes")
    assert refused.exit_code == 2, refused.output
    [line] = refused.stderr.strip().splitlines()
    assert "selects none of the alternatives of step implement-function" in line
    assert "1. hello_cli/greet.py with a hello() function" in line
    assert "--choose 1" in line
    assert f"correct decision {demo_plan['strategy']} (strategy) instead" in line
    assert _sqlite_dump(demo_plan["db"]) == before

    dry = run(*args, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "alternatives of step implement-function\n  1. hello_cli/greet.py" in dry.output
    assert "the guidance selects none of them" in dry.output
    assert "again (1); take it anyway with --choose 1" in dry.output  # one alternative: no N
    preview = json.loads(run(*args, "--dry-run", "--format=json").output)
    assert preview["alternatives"]["options"] == ["hello_cli/greet.py with a hello() function"]
    assert preview["alternatives"]["selected"] is None
    assert _sqlite_dump(demo_plan["db"]) == before


def test_choose_replays_with_the_named_alternative(
    run: Run, demo_plan: dict[str, str], tmp_path: Path
) -> None:
    """Guidance that names neither strategy, with --choose 2: the greeter class is what the
    replay makes — in the tree and in the sandbox's files."""
    args = ("plan", "correct", demo_plan["strategy"], "--mode=revert", "--yes")
    refused = run(*args, "--guidance", "make it easier to extend")
    assert refused.exit_code == 2 and "--choose N (1-2)" in refused.stderr
    dry = run(*args, "--guidance", "make it easier to extend", "--choose", "2", "--dry-run")
    assert "the replay takes 2 (chosen with --choose)" in dry.output
    result = run(*args, "--guidance", "make it easier to extend", "--choose", "2")
    assert result.exit_code == 0, result.output
    tree = json.loads(run("plan", "tree", demo_plan["plan"], "--format=json").output)
    current = {d["decision_type"]: d["chosen_option"] for d in tree["decisions"]}
    assert current["strategy_choice"] == "A greeter class with a configurable greeting"
    assert current["implementation_choice"] == "hello_cli/greet.py with a Greeter class"
    [hello_cli] = (tmp_path / "sandboxes" / demo_plan["plan"]).glob("*__hello-cli")
    greet = (hello_cli / "worktree" / "hello_cli" / "greet.py").read_text()  # a git worktree
    assert "class Greeter:" in greet and "def hello(" not in greet


def test_superseded_by_names_the_decision_that_replaced_it(
    run: Run, demo_plan: dict[str, str]
) -> None:
    """Finding 9 of issue 14: not the correction (user_intervention) decision."""
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
    tree = json.loads(
        run("plan", "tree", demo_plan["plan"], "--show-superseded", "--format=json").output
    )
    rows = tree["decisions"]
    current = {d["chosen_option"]: d["decision_id"] for d in rows if d["superseded_by"] is None}
    replaced_by = {d["chosen_option"]: d["superseded_by"] for d in rows if d["superseded_by"]}
    greeter = current["A greeter class with a configurable greeting"]
    assert replaced_by["A plain function registered in COMMANDS"] == greeter
    # re-made at the same step; and the step taken in place of one whose `when:` no longer holds
    assert replaced_by["A row in the releases table"] == current["A row in the releases table"]
    assert (
        replaced_by["hello_cli/greet.py with a hello() function"]
        == current["hello_cli/greet.py with a Greeter class"]
    )

    explained = json.loads(run("plan", "explain", demo_plan["strategy"], "--format=json").output)
    assert explained["decision"]["superseded_by"] == greeter
    text = run("plan", "explain", demo_plan["strategy"]).output
    assert (
        f"✗ superseded by  {greeter}  strategy_choice: A greeter class with a configurable greeting"
        in text
    )
    refused = run("plan", "correct", demo_plan["strategy"], "--mode=revert", "--guidance", "x")
    assert refused.exit_code == 2 and f"already superseded by {greeter}" in refused.stderr


def test_explain_says_where_a_revert_goes_when_the_group_holds_no_checkpoint(
    run: Run, demo_plan: dict[str, str]
) -> None:
    """The first Execute decision's checkpoint group is empty (nothing was written before
    it); explain showed the group's id alone, and the tree no ⚑, as if a revert had nowhere
    to go. Explain says that a revert puts each resource back as it began, and the tree
    marks it as every decision with a checkpoint group."""
    tree = json.loads(run("plan", "tree", demo_plan["plan"], "--format=json").output)
    ids = {d["chosen_option"]: d["decision_id"] for d in tree["decisions"]}
    marked = {d["chosen_option"] for d in tree["decisions"] if d["has_checkpoint"]}
    assert "hello_cli/greet.py with a hello() function" in marked
    assert "A plain function registered in COMMANDS" not in marked  # Strategize: no group
    text = run("plan", "tree", demo_plan["plan"]).output
    assert "hello_cli/greet.py with a hello() function  (0.80)  ⚑" in text
    first = run("plan", "explain", ids["hello_cli/greet.py with a hello() function"]).output
    group = first.split("checkpoint group\n")[1].split("\n\n")[0].splitlines()
    assert len(group) == 2 and group[0].endswith("  committed"), group
    assert (
        group[1] == "  (no resource was written before it: a revert goes back to where each began)"
    )
    later = run("plan", "explain", demo_plan["record"]).output
    assert "no resource was written before it" not in later
    assert "  ⚑ " in later.split("checkpoint group\n")[1]
