"""A failed tool call or validation is retried, then waits for a person; never applied
silently (engine/run/failures.py). On the demo, with its real repository and database."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.cli import cli
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import DecisionType, Phase, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.engine.run.approvals import answer_approval
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store

RECOVERY = (DecisionType.ERROR_RECOVERY, DecisionType.VALIDATION_RESPONSE)


def _edit_action(demo: DemoEnvironment, change: Any) -> None:
    data = yaml.safe_load(demo.action_file.read_text(encoding="utf-8"))
    change({d["key"]: d for d in data["decisions"]}, data)
    demo.action_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _test_file(content: str) -> Any:
    def change(points: dict[str, Any], _: dict[str, Any]) -> None:
        points["test"]["alternatives"][0]["tool_calls"][0]["arguments"]["content"] = content

    return change


FAILING_TEST = """import unittest

from hello_cli.greet import hello


class HelloTest(unittest.TestCase):
    def test_greets_by_name(self) -> None:
        self.assertEqual(hello("Ada"), "Hi, Ada!")
"""


def _recoveries(store: Store, plan_id: str) -> list[tuple[DecisionType, str]]:
    with store.unit_of_work() as uow:
        return [
            (d.decision_type, d.chosen_option)
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.decision_type in RECOVERY
        ]


def _runs_of(store: Store, plan_id: str, tool: str) -> list[bool | None]:
    with store.unit_of_work() as uow:
        return [
            i.ok
            for d in uow.decisions.for_plan(plan_id)
            for i in uow.tool_invocations.for_decision(d.decision_id)
            if i.tool == tool
        ]


def _branches(demo: DemoEnvironment) -> str:
    return subprocess.run(
        ["git", "-C", str(demo.repository), "branch", "--list"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _profile(store: Store, name: str, **changes: Any) -> str:
    data = ProfileRegistry.builtins()["ci"].model_dump(mode="python")
    safety = changes.pop("safety", {})
    data.update(name=f"local/{name}", description=f"ci with {changes} {safety}", **changes)
    data["safety"] = {**data["safety"], **safety}
    ProfileRegistry(store).add(AutomationProfile.model_validate(data))
    return f"local/{name}"


def test_a_failing_validation_under_ci_is_retried_then_waits_and_is_not_applied(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    _edit_action(demo, _test_file(FAILING_TEST))
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    # max_retries_per_step is 3: the first run and three retries, then a person is asked
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False] * 4
    recoveries = _recoveries(sqlite_store, plan.plan_id)
    assert [t for t, _ in recoveries] == [DecisionType.VALIDATION_RESPONSE] * 4
    assert [o for _, o in recoveries][-1] == "Stop and ask a person"
    with sqlite_store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
        assert uow.plans.get(plan.plan_id).state is not PlanState.APPLIED
    assert asked.kind is ApprovalKind.ESCALATION and "local/run-tests failed" in asked.question
    assert "cleveragents/apply/" not in _branches(demo)  # nothing landed
    with pytest.raises(UserError, match="waits for an answer before its Apply gate"):
        apply_plan(sqlite_store, plan.plan_id, "maria", options)  # `plan apply` cannot skip it
    # Running again does not slip past it; approving it goes on to Apply (ci applies)
    assert resume_plan(sqlite_store, plan.plan_id, options).state is PlanState.AWAITING_APPROVAL
    answer_approval(sqlite_store, asked.approval_id, approve=True, by="maria")
    done = resume_plan(sqlite_store, plan.plan_id, options)
    assert (done.phase, done.state) == (Phase.APPLY, PlanState.APPLIED)
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False] * 4  # not re-run


def test_a_retry_that_passes_settles_the_failure_and_the_plan_goes_on(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    marker = tmp_path / "ran-once"
    flaky = f"""import pathlib
import unittest


class FlakyTest(unittest.TestCase):
    def test_passes_the_second_time(self) -> None:
        marker = pathlib.Path({str(marker)!r})
        first = not marker.exists()
        marker.touch()
        self.assertFalse(first, "first run fails")
"""
    _edit_action(demo, _test_file(flaky))
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )
    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False, True]
    assert _recoveries(sqlite_store, plan.plan_id) == [
        (DecisionType.VALIDATION_RESPONSE, "Retry local/run-tests (retry 1 of 3)")
    ]


def test_a_write_to_a_resource_that_does_not_exist_records_error_recovery(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    def write_elsewhere(points: dict[str, Any], _: dict[str, Any]) -> None:
        call = points["record"]["alternatives"][0]["tool_calls"]
        call[:] = [
            {
                "tool": "local/write-file",
                "arguments": {
                    "resource": f"{demo.namespace}/no-such-repo",
                    "path": "x.txt",
                    "content": "x\n",
                },
            }
        ]

    _edit_action(demo, write_elsewhere)
    profile = _profile(sqlite_store, "one-retry", safety={"max_retries_per_step": 1})
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override=profile, options=options
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert _recoveries(sqlite_store, plan.plan_id) == [
        (DecisionType.ERROR_RECOVERY, "Retry local/write-file (retry 1 of 1)"),
        (DecisionType.ERROR_RECOVERY, "Stop and ask a person"),
    ]
    assert _runs_of(sqlite_store, plan.plan_id, "local/write-file")[-2:] == [False, False]


def test_below_the_create_file_threshold_a_failed_validation_asks_at_once(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    _edit_action(demo, _test_file(FAILING_TEST))
    profile = _profile(sqlite_store, "no-self-fix", create_file=1.0)
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override=profile, options=options
    )
    assert plan.state is PlanState.AWAITING_APPROVAL
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False]
    assert _recoveries(sqlite_store, plan.plan_id) == [
        (DecisionType.VALIDATION_RESPONSE, "Stop and ask a person")
    ]
    with sqlite_store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
    assert asked.details["flag"] == "create_file" and asked.details["threshold"] == 1.0
    assert "local/run-tests failed" in asked.question


def _cli(tmp_path: Path) -> Any:
    db = str(tmp_path / "agents.db")

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)

    return invoke


def test_denying_a_failed_validation_pauses_the_plan_with_the_choices(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    _edit_action(demo, _test_file(FAILING_TEST))
    plan: Plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )
    with sqlite_store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
    run = _cli(tmp_path)
    denied = run("approval", "deny", asked.approval_id, "--reason", "the test is wrong")
    assert denied.exit_code == 0, denied.output
    assert "paused" in denied.output and f"agents plan cancel {plan.plan_id}" in denied.output
    assert f"agents plan correct {asked.decision_id} --mode=revert" in denied.output
    with sqlite_store.unit_of_work() as uow:
        assert uow.plans.get(plan.plan_id).state is PlanState.PAUSED
    # the decision it names says why the test failed: its calls, each with how it went
    explained = run("plan", "explain", asked.decision_id).output
    calls = explained.split("tool invocations\n")[1].splitlines()
    assert calls[1].startswith("    resource: ") and "; path: tests/test_hello.py; " in calls[1]
    assert calls[4].startswith("    resource: ") and "; argv: " in calls[4]
    assert calls[:1] + calls[2:4] + calls[5:6] == [
        "  local/write-file  (writes:files)",
        "    ✓ created tests/test_hello.py: 183 bytes",
        "  local/run-tests  (runs:tests)",
        "    ✗ failed: exit status 1",
    ], calls
    assert "      AssertionError: 'Hello, Ada!' != 'Hi, Ada!'" in calls
    assert "      FAILED (failures=1)" in calls
    # resuming asks again; only an explicit cancel cancels
    again = run("plan", "resume", plan.plan_id)
    assert again.exit_code == 0 and "awaiting_approval" in again.output
    assert "local/run-tests failed" in again.output
    assert run("plan", "cancel", plan.plan_id).exit_code == 0
    with sqlite_store.unit_of_work() as uow:
        assert uow.plans.get(plan.plan_id).state is PlanState.CANCELLED


def test_a_replay_that_skips_the_failed_step_still_asks_before_apply(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    """Correcting a recovery decision replays from the failed step's actor state without
    running that step again; the failure is still asked about before the Apply gate."""
    from cleveragents_tui.domain.enums import CorrectionMode
    from cleveragents_tui.engine.correct.execute import execute
    from cleveragents_tui.engine.correct.preview import preview

    _edit_action(demo, _test_file(FAILING_TEST))
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )
    with sqlite_store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
        first_retry = next(
            d
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.decision_type is DecisionType.VALIDATION_RESPONSE
        )
    answer_approval(sqlite_store, asked.approval_id, approve=False, by="maria", reason="no")
    impact = preview(sqlite_store, first_retry.decision_id, CorrectionMode.REVERT, "retry again")
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    assert result.plan.state is not PlanState.APPLIED
    assert (result.plan.phase, result.plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with sqlite_store.unit_of_work() as uow:
        [again] = uow.approvals.pending(plan.plan_id)
    assert "local/run-tests failed" in again.question


def test_the_retry_count_a_decision_names_is_the_actions_validation_retry_limit(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    """Under ``ci`` (3 retries per step) an action allowing 1 validation retry retries once:
    the decision says "retry 1 of 1" — it said "of 3", and then no second retry came."""

    def fail_with_one_retry(points: dict[str, Any], data: dict[str, Any]) -> None:
        _test_file(FAILING_TEST)(points, data)
        data["limits"] = {"validation_retry_limit": 1}

    _edit_action(demo, fail_with_one_retry)
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert _runs_of(sqlite_store, plan.plan_id, "local/run-tests") == [False, False]
    assert _recoveries(sqlite_store, plan.plan_id) == [
        (DecisionType.VALIDATION_RESPONSE, "Retry local/run-tests (retry 1 of 1)"),
        (DecisionType.VALIDATION_RESPONSE, "Stop and ask a person"),
    ]


def test_a_check_that_exits_with_a_message_is_asked_about_with_that_message(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    """No line of its output names a failure (FAIL, ERROR, ...): the question quotes its
    last line, where such a program says why. It quoted ``exit status 1`` alone, then the
    line the program printed before its message."""

    def check_that_explains(points: dict[str, Any], _: dict[str, Any]) -> None:
        run_tests = points["test"]["alternatives"][0]["tool_calls"][1]["arguments"]
        # what it prints is written before its message, as it ran (Python buffers its
        # output to a pipe until it exits, after the message)
        script = "print('checking the guide'); raise SystemExit('the guide does not name pytest')"
        run_tests["argv"] = [run_tests["argv"][0], "-c", script]

    _edit_action(demo, check_that_explains)
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="ci", options=options
    )
    with sqlite_store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
    assert "last: exit status 1: the guide does not name pytest)" in asked.question
