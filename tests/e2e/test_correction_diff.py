"""A correction's diff tells the truth and never changes (issue 14, finding 2).

On the demo's real resources: a revert's diff (`agents plan diff --correction` and the
engine call the app's `d` makes) compares the snapshots the correction recorded — what the
sandbox held before the correction against what it holds when the replay stops, and the
state right after the corrected decision in both attempts — and stays the same after another
correction and an Apply. Binary files are summarised, control characters never reach the
terminal.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.enums import CorrectionMode, PlanState
from cleveragents_tui.engine.core import file_diff as diff_module
from cleveragents_tui.engine.core.diff import CorrectionDiff, correction_diff
from cleveragents_tui.engine.core.file_diff import FileDiff, ResourceDiff
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.engine.run.plans import change_profile
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store

GREET = "hello_cli/greet.py"
DOCUMENTED = 'def hello(name: str) -> str:\n    """Greet NAME."""\n    return f"Hello, {name}!"\n'


def _agents(store: Store, *args: str) -> Result:
    result = CliRunner().invoke(
        cli, ["--db", str(store.engine.url.database), *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result


def _action_with_a_documented_hello(demo: DemoEnvironment, folder: Path) -> Path:
    """The demo action, whose implementation step also offers a hello() with a docstring
    (chosen by guidance that says "docstring"): a revert of that step changes the code."""
    doc = yaml.safe_load(demo.action_file.read_text())
    step = next(d for d in doc["decisions"] if d["key"] == "implement-function")
    plain = step["alternatives"][0]
    write, edit = plain["tool_calls"]
    step["alternatives"].append(
        {
            "option": "hello_cli/greet.py with a documented hello() function",
            "confidence": 0.5,
            "match": ["docstring", "documented"],
            "tool_calls": [
                {**write, "arguments": {**write["arguments"], "content": DOCUMENTED}},
                copy.deepcopy(edit),  # no YAML alias: actions refuse them
            ],
        }
    )
    path = folder / "documented.action.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _current(store: Store, plan_id: str, key: str) -> str:
    with store.unit_of_work() as uow:
        return next(
            d.decision_id
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.step_key == key
        )


def _correct(store: Store, decision_id: str, guidance: str, *extra: str) -> str:
    out = _agents(
        store,
        "plan",
        "correct",
        decision_id,
        "--mode=revert",
        "--guidance",
        guidance,
        "--yes",
        *extra,
    ).output
    assert ": succeeded (attempt" in out, out
    return out.split("compare the attempts: agents plan diff --correction ")[1].strip()


def _file(diff: list[ResourceDiff], resource_id: str, path: str) -> FileDiff:
    resource = next(r for r in diff if r.resource_id == resource_id)
    return next(f for f in resource.files if f.change.path == path)


def _frozen(d: CorrectionDiff) -> object:
    """What a diff shows: the decisions (id, type, choice) and both comparisons."""
    return (
        [(r.decision_id, r.decision_type, r.chosen_option) for r in d.superseded],
        [(r.decision_id, r.decision_type, r.chosen_option) for r in d.replacements],
        d.at_decision,
        d.final,
        d.note,
    )


def test_a_revert_diff_shows_what_differed_and_is_the_same_after_a_later_correction_and_apply(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions, tmp_path: Path
) -> None:
    # Given the demo plan (with a documented alternative for its implementation) at Apply
    action = load_action(str(_action_with_a_documented_hello(demo, tmp_path)))
    plan = start_plan(sqlite_store, action, profile_override="auto", options=options)
    assert plan.state is PlanState.AWAITING_APPROVAL
    hello_cli = next(r for r in action.resources if r.endswith("/hello-cli"))
    worktree = PlanSandboxes(sqlite_store, plan.plan_id, options.sandbox_base).get(hello_cli)
    assert worktree.workdir is not None
    before = (worktree.workdir / GREET).read_text()
    assert '"""Greet NAME."""' not in before

    # When the implementation decision is reverted with guidance that picks the docstring
    correction = _correct(
        sqlite_store, _current(sqlite_store, plan.plan_id, "implement-function"), "add a docstring"
    )
    after = (worktree.workdir / GREET).read_text()
    assert after == DOCUMENTED  # the sandbox holds the new code

    # Then the diff compares what the sandbox held before with what it holds now ...
    first = correction_diff(sqlite_store, correction)
    final = _file(first.final, hello_cli, GREET)
    assert (final.old, final.new, final.summary) == (before, after, None)
    # ... and, at the corrected decision, the old code right after it against the new one;
    # nothing else differs (app.py and the test are the same in both attempts)
    assert first.at_decision is not None
    for compared in (first.final, first.at_decision):
        code = next(r for r in compared if r.resource_id == hello_cli)
        assert [f.change.path for f in code.files] == [GREET]
    at = _file(first.at_decision, hello_cli, GREET)
    assert (at.old, at.new) == (before, DOCUMENTED)
    shown = _agents(sqlite_store, "plan", "diff", "--correction", correction).output
    assert shown.count('+    """Greet NAME."""') == 2  # in both comparisons
    assert "- implementation_choice: hello_cli/greet.py with a hello() function" in shown
    assert "+ implementation_choice: hello_cli/greet.py with a documented hello() function" in shown

    # When another correction replays the plan again, and the plan is then applied
    _correct(
        sqlite_store, _current(sqlite_store, plan.plan_id, "record"), "record it", "--choose", "1"
    )
    _agents(sqlite_store, "plan", "apply", plan.plan_id)

    # Then the first correction's diff is exactly what it was
    assert _agents(sqlite_store, "plan", "diff", "--correction", correction).output == shown
    assert _frozen(correction_diff(sqlite_store, correction)) == _frozen(first)
    doc = json.loads(
        _agents(sqlite_store, "plan", "diff", "--correction", correction, "--format=json").output
    )
    assert [c["path"] for c in doc["at_decision"][0]["changes"]] == [GREET]
    assert "snapshots" not in doc["correction"]["report"]  # the contents are not repeated
    shown_plan = json.loads(
        _agents(sqlite_store, "plan", "show", plan.plan_id, "--format=json").output
    )
    assert all("snapshots" not in c["report"] for c in shown_plan["corrections"])


@pytest.mark.parametrize("side_by_side", [False, True])
def test_binary_files_are_summarised_and_control_characters_never_reach_the_terminal(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions, side_by_side: bool
) -> None:
    # Given the demo plan at Apply, whose sandbox holds a compiled file and a text file with
    # terminal escape sequences (as test runs and tools leave them)
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    hello_cli = next(r for r in load_action(str(demo.action_file)).resources if "hello-cli" in r)
    folder = PlanSandboxes(sqlite_store, plan.plan_id, options.sandbox_base).get(hello_cli).workdir
    assert folder is not None
    compiled = b"\xa7\r\r\n\x00\x00\x00\x00\x1b[2J\x07" + bytes(range(256))
    (folder / "hello_cli" / "banner.bin").write_bytes(compiled)
    (folder / "NOTES.txt").write_text("plain line\n\x1b[31mred\x1b[0m and a bell\x07\n")

    # When the strategy is reverted (Execute rolls back: both files go)
    correction = _correct(
        sqlite_store,
        _current(sqlite_store, plan.plan_id, "strategy"),
        "use a greeter class",
        "--outside-changes=discard",  # written by hand, outside the plan
    )
    args = ["plan", "diff", "--correction", correction]
    shown = _agents(sqlite_store, *args, *(["--side-by-side"] if side_by_side else [])).output

    # Then the binary file is one summary line, and no control character is printed
    assert "hello_cli/banner.bin (deleted)" in shown
    assert f"(binary file: contents not shown ({len(compiled)} bytes → absent))" in shown
    assert "\\x1b[31mred\\x1b[0m and a bell\\x07" in shown  # escaped, visible
    assert not [c for c in shown if ord(c) < 32 and c not in "\n\t"]
    assert "\x7f" not in shown
    diff = correction_diff(sqlite_store, correction)
    summary = _file(diff.final, hello_cli, "hello_cli/banner.bin")
    assert (summary.old, summary.new) == (None, None)
    assert summary.summary is not None and summary.summary.startswith("binary file")


def test_a_replay_that_goes_on_through_apply_records_its_diff_before_apply_lands(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the demo plan at its Apply gate, switched to a profile that applies by itself
    action = load_action(str(demo.action_file))
    plan = start_plan(sqlite_store, action, profile_override="auto", options=options)
    change_profile(sqlite_store, plan.plan_id, "full-auto")
    app_db = next(r for r in action.resources if r.endswith("/app-db"))

    # When the release row is reverted with other values: the replay runs on and applies
    record = _current(sqlite_store, plan.plan_id, "record")
    impact = preview(sqlite_store, record, CorrectionMode.REVERT, "record it again", choose=1)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    assert result.plan.state is PlanState.APPLIED

    # Then the database's side of the diff was read before the transaction was committed
    diff = correction_diff(sqlite_store, result.correction.correction_id)
    database = next(r for r in diff.final if r.resource_id == app_db)
    assert database.note is None, database.note
    assert database.new_ref and database.old_ref


def test_a_diff_past_its_size_limit_lists_the_other_files_without_their_contents(
    sqlite_store: Store,
    demo: DemoEnvironment,
    options: RunOptions,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a correction that keeps at most a few bytes of text for its diff
    monkeypatch.setattr(diff_module, "TOTAL_LIMIT", 1)
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    folder = (
        PlanSandboxes(sqlite_store, plan.plan_id, options.sandbox_base)
        .get(next(r for r in load_action(str(demo.action_file)).resources if "hello-cli" in r))
        .workdir
    )
    assert folder is not None
    for name in ("a.txt", "b.txt"):  # files the rollback takes away
        (folder / name).write_text(f"{name}\n")
    # When the strategy is reverted (greet.py changes, the two files go)
    correction = _correct(
        sqlite_store,
        _current(sqlite_store, plan.plan_id, "strategy"),
        "use a greeter class",
        "--outside-changes=discard",  # written by hand, outside the plan
    )
    # Then the first file's text is kept, and the others are listed with a summary only
    files = [f for r in correction_diff(sqlite_store, correction).final for f in r.files]
    assert files[0].summary is None and files[0].old == "a.txt\n"
    assert files[1:] and all(
        f.summary == "contents not kept: the diff already holds 1 bytes of text" for f in files[1:]
    )


def test_a_sandbox_made_anew_by_the_phase_level_tier_is_compared_with_its_old_attempt(
    tmp_path: Path, sqlite_store: Store, options: RunOptions
) -> None:
    from tests.e2e.test_phase_level_tier import CLASS, DOCS, REPO, at_apply_gate, register

    # Given a plan whose repository sandbox has no checkpoints (checkpointing off)
    register(sqlite_store, tmp_path, repo_checkpoints=False)
    _, keys = at_apply_gate(sqlite_store, options)
    # When its strategy is corrected (the sandbox is made anew from the real repository)
    impact = preview(sqlite_store, keys["strategy"], CorrectionMode.REVERT, CLASS)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    # Then the diff compares what its old attempt had changed with the new sandbox (the
    # function's file gone, the class's made; the note both wrote is the same), and the
    # other resource as usual
    diff = correction_diff(sqlite_store, result.correction.correction_id)
    by_id = {r.resource_id: r for r in diff.final}
    assert by_id[REPO].note is None
    changed = {(f.change.path, f.change.kind.value, f.old, f.new) for f in by_id[REPO].files}
    assert changed == {
        ("greet.py", "deleted", "greet.py\n", None),
        ("greeter.py", "added", None, "greeter.py\n"),
    }
    assert by_id[DOCS].note is None and by_id[DOCS].files
