"""A failed validation is fixed, then run again (behavior.md: the ``create_file`` flag,
"fix-then-revalidate" within ``validation_retry_limit``). On the demo, with its real
repository and database.

The demo's test step writes a test that expects the wrong greeting, and the action gives
that step a ``fix`` (an edit of the test). The oracle is a fresh plan of the demo as it
ships, whose test was right from the start: the fixed plan must land the same tree and the
same rows, and a run stopped between the fix and the validation must land them too, with
the fix made once.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cleveragents_tui import failpoints
from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import CorrectionMode, DecisionType, Phase, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.profile import AutomationGuard
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.run.approvals import answer_approval, pending_approvals
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.e2e.test_corrections import decisions_by_key, run_demo
from tests.e2e.test_failure_handling import FAILING_TEST, _recoveries, _runs_of
from tests.e2e.test_revert_reruns_later_checks import _outcome

INFORMAL = "hello_cli/greet.py saying Hi"
FIXED = "Fix with local/edit-file, then retry local/run-tests (retry 1 of 3)"


def _failing_test_with_a_fix(
    demo: DemoEnvironment,
    fix_works: bool = True,
    by_command: bool = False,
    informal: str | None = None,
) -> None:
    """The demo's test expecting "Hi, Ada!", its fix editing it to expect "Hello, Ada!";
    ``informal`` adds a second implementation that says Hi (chosen when "choose")."""
    data = yaml.safe_load(demo.action_file.read_text(encoding="utf-8"))
    [test] = [d for d in data["decisions"] if d["key"] == "test"]
    alternative = test["alternatives"][0]
    write = alternative["tool_calls"][0]["arguments"]
    write["content"] = FAILING_TEST
    new = '"Hello, Ada!"' if fix_works else '"Hey, Ada!"'
    edit = {"resource": write["resource"], "path": write["path"], "old": '"Hi, Ada!"', "new": new}
    alternative["fix"] = [{"tool": "local/edit-file", "arguments": edit}]
    if by_command:  # the same edit, by a program
        path, old = write["path"], edit["old"]
        script = (
            f"import pathlib; p = pathlib.Path({path!r}); "
            f"p.write_text(p.read_text().replace({old!r}, {new!r}))"
        )
        argv = [sys.executable, "-c", script]
        alternative["fix"] = [
            {
                "tool": "local/run-command",
                "arguments": {"resource": write["resource"], "argv": argv},
            }
        ]
    if informal is not None:
        [implement] = [d for d in data["decisions"] if d["key"] == "implement-function"]
        hi: dict[str, Any] = yaml.safe_load(yaml.safe_dump(implement["alternatives"][0]))
        hi.update(option=INFORMAL, confidence=0.5, match=["informal"])
        hi["tool_calls"][0]["arguments"]["content"] = (
            'def hello(name: str) -> str:\n    return f"Hi, {name}!"\n'
        )
        implement["alternatives"].append(hi)
        if informal == "choose":
            implement["choose"] = INFORMAL
    demo.action_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _fix_runs(store: Store, plan_id: str) -> list[bool | None]:
    """The outcomes of the edits the retries made (the demo's own edit is not one)."""
    with store.unit_of_work() as uow:
        return [
            i.ok
            for d in uow.decisions.for_plan(plan_id)
            if d.decision_type is DecisionType.VALIDATION_RESPONSE
            for i in uow.tool_invocations.for_decision(d.decision_id)
            if i.tool == "local/edit-file"
        ]


def _landed(demo: DemoEnvironment) -> tuple[str, list[tuple[Any, ...]]]:
    """What the plan landed: the apply branch's tree and the database's releases."""
    branches = subprocess.run(
        [
            "git",
            "-C",
            str(demo.repository),
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads/cleveragents/apply",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    [branch] = branches
    tree = subprocess.run(
        ["git", "-C", str(demo.repository), "rev-parse", f"{branch}^{{tree}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with sqlite3.connect(demo.database) as db:
        rows = db.execute("SELECT version, notes FROM releases ORDER BY version").fetchall()
    return tree, rows


def _fresh_demo_landed(tmp_path: Path) -> tuple[str, list[tuple[Any, ...]]]:
    """The oracle: the demo as it ships (its test right from the start), run and applied."""
    store = Store.open(str(tmp_path / "oracle.db"))
    demo = build_demo(store, tmp_path / "oracle")
    options = RunOptions(sandbox_base=tmp_path / "oracle-sandboxes")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )
    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    return _landed(demo)


def test_a_failed_test_is_fixed_run_again_and_lands_what_a_right_first_time_plan_lands(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    _failing_test_with_a_fix(demo)

    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )

    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)  # nobody was asked
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False, True]
    assert _fix_runs(sqlite_store, plan.plan_id) == [True]
    assert _recoveries(sqlite_store, plan.plan_id) == [(DecisionType.VALIDATION_RESPONSE, FIXED)]
    assert _landed(demo) == _fresh_demo_landed(tmp_path)
    # the failure was logged before the decision that fixed it (progress lines, the app)
    with sqlite_store.unit_of_work() as uow:
        [failed] = uow.events.payloads(plan.plan_id, "call_failed")
    assert (failed["tool"], failed["step"], failed["run"]) == ("local/run-tests", "test", 1)
    assert str(failed["output"]).startswith("exit status 1: FAIL: test_greets_by_name")


def test_a_run_stopped_between_the_fix_and_the_test_finishes_the_same_fix_once(
    demo: DemoEnvironment,
    sqlite_store: Store,
    options: RunOptions,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _failing_test_with_a_fix(demo)
    # the demo's implementation makes the first edit; the fix is the second
    monkeypatch.setenv(failpoints.ENV_VAR, "tool.recorded@local/edit-file#2")
    failpoints.reset()
    with pytest.raises(failpoints.InjectedFault):
        start_plan(
            sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
        )
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()
    with sqlite_store.unit_of_work() as uow:
        [stopped] = [p for p in uow.plans.all() if p.parent_plan_id is None]
    assert _runs_of(sqlite_store, stopped.plan_id, "local/run-tests") == [False]  # fixed, not run

    plan = resume_plan(sqlite_store, stopped.plan_id, options)

    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    assert _fix_runs(sqlite_store, plan.plan_id) == [True]  # not made again
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False, True]
    assert _recoveries(sqlite_store, plan.plan_id) == [(DecisionType.VALIDATION_RESPONSE, FIXED)]
    assert _landed(demo) == _fresh_demo_landed(tmp_path)


def test_a_fix_that_does_not_work_is_retried_within_the_limit_then_a_person_is_asked(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    _failing_test_with_a_fix(demo, fix_works=False)

    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )

    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False] * 4
    # each retry makes the fix (the edit finds it made after the first) and runs the test
    assert _fix_runs(sqlite_store, plan.plan_id) == [True, True, True]
    chosen = [o for _, o in _recoveries(sqlite_store, plan.plan_id)]
    assert chosen == [
        *(
            f"Fix with local/edit-file, then retry local/run-tests (retry {n} of 3)"
            for n in (1, 2, 3)
        ),
        "Stop and ask a person",
    ]
    with sqlite_store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
        failed = uow.events.payloads(plan.plan_id, "call_failed")
    assert "local/run-tests failed" in asked.question and "4 runs" in asked.question
    assert [f["run"] for f in failed] == [1, 2, 3, 4]  # each failure, before what answered it


def test_a_fix_a_guard_stops_asks_and_is_made_once_approved(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    _failing_test_with_a_fix(demo, by_command=True)
    ci = ProfileRegistry(sqlite_store).get("ci")
    guard = AutomationGuard(tool_denylist=("local/run-command",))
    ProfileRegistry(sqlite_store).add(ci.model_copy(update={"name": "team/ci", "guards": guard}))

    plan = start_plan(
        sqlite_store,
        load_action(str(demo.action_file)),
        profile_override="team/ci",
        options=options,
    )

    [asked] = pending_approvals(sqlite_store, plan.plan_id)
    assert asked.kind is ApprovalKind.GUARD and asked.question.startswith(
        "Allow local/run-command (resource: "
    )
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False]  # not run again yet
    answer_approval(sqlite_store, asked.approval_id, approve=True, by="ana")
    done = resume_plan(sqlite_store, plan.plan_id, options)

    assert (done.phase, done.state) == (Phase.APPLY, PlanState.APPLIED)
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-command") == [True]
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False, True]
    assert _landed(demo) == _fresh_demo_landed(tmp_path)


def test_a_correction_rolls_the_fix_back_with_the_work_it_fixed(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    # Given a plan at its Apply gate whose test was fixed to expect the plain greeting
    _failing_test_with_a_fix(demo, informal="offer")
    plan = run_demo(sqlite_store, demo, options)
    assert _fix_runs(sqlite_store, plan.plan_id) == [True]
    # When the implementation is corrected to the greeting the test expected at first
    implement = decisions_by_key(sqlite_store, plan.plan_id)["implement-function"]
    impact = preview(sqlite_store, implement, CorrectionMode.REVERT, "an informal greeting")
    execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    # Then the fix went with the test it fixed: the test passes as first written, nothing is
    # fixed, and the plan is where a fresh plan with that greeting is, and lands the same
    fresh = build_demo(sqlite_store, tmp_path / "fresh")
    _failing_test_with_a_fix(fresh, informal="choose")
    oracle = run_demo(sqlite_store, fresh, options)
    assert _outcome(sqlite_store, plan.plan_id) == _outcome(sqlite_store, oracle.plan_id)
    assert not [k for k in decisions_by_key(sqlite_store, plan.plan_id) if k.startswith("recover:")]
    runs = _runs_of(sqlite_store, plan.plan_id, "local/run-tests")
    assert runs[-1] is True  # the last run, on the corrected code, passed
    apply_plan(sqlite_store, plan.plan_id, "ana", options)
    apply_plan(sqlite_store, oracle.plan_id, "ana", options)
    assert _landed(demo) == _landed(fresh)


def test_correcting_a_fix_fixes_again_before_the_apply_gate(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    # Given a plan at its Apply gate whose test was fixed by a retry
    _failing_test_with_a_fix(demo)
    plan = run_demo(sqlite_store, demo, options)
    [fix] = [k for k in decisions_by_key(sqlite_store, plan.plan_id) if k.startswith("recover:")]
    fixed = decisions_by_key(sqlite_store, plan.plan_id)[fix]
    # When the fix is corrected (no step makes it again: its failed step stays)
    impact = preview(sqlite_store, fixed, CorrectionMode.REVERT, "fix it again")
    done = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    # Then the failure is fixed and run again before the Apply gate, not left to a person
    assert done.plan.state is PlanState.AWAITING_APPROVAL
    with sqlite_store.unit_of_work() as uow:
        [gate] = uow.approvals.pending(plan.plan_id)
    assert gate.kind is ApprovalKind.APPLY_GATE
    assert _fix_runs(sqlite_store, plan.plan_id) == [True, True]  # the fix, then again
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests")[-1] is True
    apply_plan(sqlite_store, plan.plan_id, "ana", options)
    assert _landed(demo) == _fresh_demo_landed(tmp_path)


def _failing_test_asked_at_once(demo: DemoEnvironment) -> None:
    """The demo's failing test with no retry allowed: a person is asked at its failure."""
    _failing_test_with_a_fix(demo)
    data = yaml.safe_load(demo.action_file.read_text(encoding="utf-8"))
    data.setdefault("limits", {})["validation_retry_limit"] = 0
    demo.action_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def test_choosing_to_be_asked_for_a_fix_rolls_it_back_and_asks_as_a_plan_that_never_fixed(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    # Given a plan at its Apply gate whose test was fixed by a retry
    _failing_test_with_a_fix(demo)
    plan = run_demo(sqlite_store, demo, options)
    [fix] = [k for k in decisions_by_key(sqlite_store, plan.plan_id) if k.startswith("recover:")]
    fixed = decisions_by_key(sqlite_store, plan.plan_id)[fix]
    # When the fix is corrected with its other alternative picked: stop and ask a person
    impact = preview(sqlite_store, fixed, CorrectionMode.REVERT, "I will fix it myself", choose=2)
    assert impact.alternatives is not None
    assert impact.alternatives.options == ("Retry local/run-tests", "Stop and ask a person")
    assert impact.alternatives.option == "Stop and ask a person"
    done = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    # Then the fix is rolled back, not made again, and a person is asked about the failure,
    # as in a fresh plan that asks at the failure; once both accept it, both land the same
    assert done.plan.state is PlanState.AWAITING_APPROVAL
    assert _fix_runs(sqlite_store, plan.plan_id) == [True]  # the fix rolled back, not made again
    assert _recoveries(sqlite_store, plan.plan_id) == [
        (DecisionType.VALIDATION_RESPONSE, "Stop and ask a person")
    ]
    escalation = f"{fix.rpartition(':')[0]}:escalate"
    with sqlite_store.unit_of_work() as uow:
        stop = uow.decisions.get(decisions_by_key(sqlite_store, plan.plan_id)[escalation])
    with pytest.raises(UserError, match="stopped to ask a person about a failed call"):
        preview(sqlite_store, stop.decision_id, CorrectionMode.REVERT, "retry", choose=1)
    assert stop.rationale == (
        "the execution actor makes no fix: a person chose it, correcting the retry: "
        "I will fix it myself"
    )
    fresh = build_demo(sqlite_store, tmp_path / "fresh")
    _failing_test_asked_at_once(fresh)
    oracle = run_demo(sqlite_store, fresh, options)
    for ran in (plan, oracle):
        with sqlite_store.unit_of_work() as uow:
            [asked] = uow.approvals.pending(ran.plan_id)
        assert asked.kind is ApprovalKind.ESCALATION
        assert "local/run-tests failed in step test (1 run; last: exit status 1" in asked.question
        answer_approval(sqlite_store, asked.approval_id, approve=True, by="ana")
        resume_plan(sqlite_store, ran.plan_id, options)
    # the same decisions and question; the stop comes last in the corrected plan (at the end
    # of Execute, where a failure a correction left is settled), right after the failed
    # test in the fresh one
    (phase, state, made, pending), expected = (
        _outcome(sqlite_store, plan.plan_id),
        _outcome(sqlite_store, oracle.plan_id),
    )
    assert (phase, state, sorted(made), pending) == (
        *expected[:2],
        sorted(expected[2]),
        expected[3],
    )
    apply_plan(sqlite_store, plan.plan_id, "ana", options)
    apply_plan(sqlite_store, oracle.plan_id, "ana", options)
    assert _landed(demo) == _landed(fresh)


def test_a_failed_call_that_is_no_validation_runs_again_as_it_is_in_a_scripted_plan(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    """An alternative's ``fix:`` is for its validations: a write the resource refuses runs
    again as it is, the fix is never made in its place, and a person is asked."""
    _failing_test_with_a_fix(demo)
    data = yaml.safe_load(demo.action_file.read_text(encoding="utf-8"))
    [test] = [d for d in data["decisions"] if d["key"] == "test"]
    test["alternatives"][0]["tool_calls"][0]["arguments"]["path"] = "../outside.py"
    demo.action_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    plan = run_demo(sqlite_store, demo, options)

    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert _recoveries(sqlite_store, plan.plan_id) == [
        *[
            (DecisionType.ERROR_RECOVERY, f"Retry local/write-file (retry {n} of 3)")
            for n in (1, 2, 3)
        ],
        (DecisionType.ERROR_RECOVERY, "Stop and ask a person"),
    ]
    assert _runs_of(sqlite_store, plan.plan_id, "local/write-file")[-4:] == [False] * 4
    assert _fix_runs(sqlite_store, plan.plan_id) == []  # no edit in the write's place
    with sqlite_store.unit_of_work() as uow:
        edits = [
            i.tool
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.decision_type is DecisionType.ERROR_RECOVERY
            for i in uow.tool_invocations.for_decision(d.decision_id)
        ]
    assert edits == ["local/write-file"] * 3
