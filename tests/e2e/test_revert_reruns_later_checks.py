"""A revert runs again the later checks whose verdict was about the work it rolls back.

A decision that only runs the tests writes nothing, but what it found was true of the
files the revert erases. Kept as it was, the corrected tree would show the tests as run and
passed, and the plan would reach its Apply gate with code no test ever ran on. The oracle is
a fresh plan of the same action that takes the corrected choice from the start: there the
tests fail, are retried, and a person is asked.
"""

from __future__ import annotations

from typing import Any

import yaml

from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import CorrectionMode, DecisionType, Phase, PlanState
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.store.store import Store
from tests.e2e.test_corrections import decisions_by_key, run_demo

INFORMAL = "hello_cli/greet.py saying Hi"


def _checks_apart(demo: DemoEnvironment, choose_informal: bool = False) -> None:
    """The demo's action with its test run in a decision of its own (``check``, after the
    test file is written), and a second way to write the greeting, which the test rejects."""
    data = yaml.safe_load(demo.action_file.read_text(encoding="utf-8"))
    points = {d["key"]: d for d in data["decisions"]}
    calls = points["test"]["alternatives"][0]["tool_calls"]
    run_tests = calls.pop()
    check = {
        "key": "check",
        "type": "tool_invocation",
        "parent": "strategy",
        "question": "Does the suite pass?",
        "alternatives": [
            {"option": "Run the whole suite", "confidence": 0.9, "tool_calls": [run_tests]}
        ],
    }
    data["decisions"].insert(data["decisions"].index(points["test"]) + 1, check)
    implement = points["implement-function"]
    informal: dict[str, Any] = yaml.safe_load(yaml.safe_dump(implement["alternatives"][0]))
    informal.update(option=INFORMAL, confidence=0.5, match=["informal", "hi"])
    informal["tool_calls"][0]["arguments"]["content"] = (
        'def hello(name: str) -> str:\n    return f"Hi, {name}!"\n'
    )
    implement["alternatives"].append(informal)
    if choose_informal:
        implement["choose"] = INFORMAL
    demo.action_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


Outcome = tuple[
    Phase, PlanState, list[tuple[str | None, DecisionType, str]], list[tuple[ApprovalKind, str]]
]


def _outcome(store: Store, plan_id: str) -> Outcome:
    """What the plan did and waits for, as a user reads it: its state, the current
    decisions in the order made (a correction's own guidance record aside) and the kind of
    question pending."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        decisions: list[tuple[str | None, DecisionType, str]] = [
            (d.step_key, d.decision_type, d.chosen_option)
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.decision_type is not DecisionType.USER_INTERVENTION
        ]
        pending = [(a.kind, a.question) for a in uow.approvals.pending(plan_id)]
    return plan.phase, plan.state, decisions, pending


def test_a_revert_runs_the_later_tests_again_on_the_corrected_code(
    tmp_path: Any, sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the demo with its test run as a decision of its own, at its Apply gate
    _checks_apart(demo)
    plan = run_demo(sqlite_store, demo, options)
    assert plan.state is PlanState.AWAITING_APPROVAL
    before = decisions_by_key(sqlite_store, plan.plan_id)
    # When the implementation is corrected to the greeting the test rejects
    impact = preview(
        sqlite_store, before["implement-function"], CorrectionMode.REVERT, "an informal hi"
    )
    # Then the preview says the check is made again, on the files it checked
    assert ("check", (f"{demo.namespace}/hello-cli",)) in [
        (r.step_key, r.resources) for r in impact.remade
    ]
    execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    # And the plan stops where a fresh plan taking that greeting from the start stops: the
    # tests fail, are retried, and a person is asked (not the Apply gate)
    corrected = _outcome(sqlite_store, plan.plan_id)
    [(kind, question)] = corrected[3]
    assert kind is ApprovalKind.ESCALATION and "local/run-tests failed" in question
    fresh = build_demo(sqlite_store, tmp_path / "fresh")
    _checks_apart(fresh, choose_informal=True)
    oracle = run_demo(sqlite_store, fresh, options)
    assert corrected == _outcome(sqlite_store, oracle.plan_id)


def test_a_second_revert_names_the_check_not_its_retries_and_passes_again(
    tmp_path: Any, sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the plan paused on the failing tests after the first correction
    _checks_apart(demo)
    plan = run_demo(sqlite_store, demo, options)
    first = decisions_by_key(sqlite_store, plan.plan_id)["implement-function"]
    impact = preview(sqlite_store, first, CorrectionMode.REVERT, "an informal hi")
    execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    # When the implementation is corrected back to the greeting the test expects
    now = decisions_by_key(sqlite_store, plan.plan_id)["implement-function"]
    impact = preview(sqlite_store, now, CorrectionMode.REVERT, "the plain hello", choose=1)
    # Then the check is named once: its retries go with it, as part of its subtree
    assert [r.step_key for r in impact.remade] == ["test", "check"]
    retries = [
        decision
        for key, decision in decisions_by_key(sqlite_store, plan.plan_id).items()
        if key.startswith("recover:check")
    ]
    assert retries and set(retries) <= set(impact.affected_decisions)
    execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    # And the plan waits where a fresh plan of the action waits: at its Apply gate
    fresh = build_demo(sqlite_store, tmp_path / "fresh")
    _checks_apart(fresh)
    oracle = run_demo(sqlite_store, fresh, options)
    assert _outcome(sqlite_store, plan.plan_id) == _outcome(sqlite_store, oracle.plan_id)
