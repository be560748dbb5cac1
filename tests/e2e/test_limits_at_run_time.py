"""Limits and safety switches act on a running plan (engine/run/policing.py).

The demo plan runs under ``ci`` (every gate automatic) with an action whose ``limits:`` are
set, or under a ``ci`` copy with a safety switch on. Before the policing module, every one of
these plans was applied: an action with ``max_tool_invocations: 1, on_exceed: terminate`` made
its 6 tool calls, a profile with ``require_human_approval`` or ``require_approval_for_apply``
asked nobody.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.limits import PlanLimits
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.engine.run.approvals import answer_approval
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store

DEMO_TOOL_CALLS = 6  # write, edit, write, run-tests, run-sql, notify (the child has its own)


def demo_action(demo: DemoEnvironment, **limits: Any) -> Action:
    action = load_action(str(demo.action_file))
    return action.model_copy(update={"limits": PlanLimits.model_validate(limits)})


def register(store: Store, name: str, **sections: dict[str, Any]) -> str:
    """``local/<name>``: ``ci`` with the ``safety`` / ``guards`` settings given."""
    data = ProfileRegistry.builtins()["ci"].model_dump(mode="python")
    data.update(name=f"local/{name}")
    data["safety"] = {**data["safety"], **sections.get("safety", {})}
    if "guards" in sections:
        data["guards"] = sections["guards"]
    ProfileRegistry(store).add(AutomationProfile.model_validate(data))
    return f"local/{name}"


def _id(plan: Plan | str) -> str:
    return plan if isinstance(plan, str) else plan.plan_id


def tool_calls(store: Store, plan: Plan | str) -> list[str]:
    with store.unit_of_work() as uow:
        decisions = uow.decisions.for_plan(_id(plan))
        return [
            call.tool
            for d in decisions
            for call in uow.tool_invocations.for_decision(d.decision_id)
        ]


def events(store: Store, plan: Plan | str, kind: str = "limit_exceeded") -> list[dict[str, object]]:
    with store.unit_of_work() as uow:
        return uow.events.payloads(_id(plan), kind)


def pending(store: Store, plan: Plan) -> list[Any]:
    with store.unit_of_work() as uow:
        return uow.approvals.pending(plan.plan_id)


def greeting_landed(demo: DemoEnvironment) -> bool:
    return (demo.repository / "hello_cli" / "greet.py").exists()


# -- the plan's tool calls ---------------------------------------------------------------------


def test_the_issue_case_terminates_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agents plan use` of an action with ``max_tool_invocations: 1, on_exceed: terminate``
    under ``ci``: one tool call, then the plan ends errored, not applied, saying why."""
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    db = str(tmp_path / "agents.db")

    def agents(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--db", db, *args], catch_exceptions=False)

    made = agents("demo", "--no-tui", "--dir", str(tmp_path / "demo"), "--format=json")
    assert made.exit_code == 0, made.output
    source = (tmp_path / "demo" / "add-greeting.action.yaml").read_text(encoding="utf-8")
    action_file = tmp_path / "limited.action.yaml"
    action_file.write_text(
        source.replace('/add-greeting"', '/add-greeting-limited"')
        + "limits: {max_tool_invocations: 1, on_exceed: terminate}\n",
        encoding="utf-8",
    )

    used = agents("plan", "use", str(action_file), "--automation-profile", "ci")
    assert used.exit_code == 1, used.output  # errored (cli/outcome.py), the reason in one line
    [line] = used.stderr.strip().splitlines()
    assert (
        "was not applied (errored): limits.max_tool_invocations exceeded: local/edit-file would "
        "be tool call 2 of at most 1, and is not made (on_exceed: terminate)"
    ) in line
    plans = json.loads(agents("plan", "list", "--format=json").output)["plans"]
    limited = next(p for p in plans if p["action"].endswith("/add-greeting-limited"))
    assert (limited["phase"], limited["state"]) == ("execute", "errored")
    shown = agents("plan", "show", limited["plan_id"])
    assert "local/edit-file would be tool call 2 of at most 1" in shown.output

    store = Store.open(f"sqlite:///{db}")
    try:
        plan = limited["plan_id"]
        assert len(tool_calls(store, plan)) == 1
        assert events(store, plan) == [
            {"limit": "limits.max_tool_invocations", "allowed": 1, "used": 2, "action": "terminate"}
        ]
        # run again: terminated again, never applied
        again = agents("plan", "run", limited["plan_id"])
        assert again.exit_code == 1 and "limits.max_tool_invocations" in again.stderr
        # running it again is no fix: the line says what is
        assert again.stderr.strip().endswith(
            "(on_exceed: terminate): the plan keeps its action's limits: raise "
            "limits.max_tool_invocations in the action and start a new plan (agents plan use), "
            f"or cancel this one: agents plan cancel {plan}"
        )
        assert len(tool_calls(store, plan)) == 1
    finally:
        store.close()
    assert not (tmp_path / "demo" / "hello-cli" / "hello_cli" / "greet.py").exists()


@pytest.mark.parametrize(
    ("limit", "applied"),
    [(DEMO_TOOL_CALLS - 1, False), (DEMO_TOOL_CALLS, True)],
    ids=["below", "at"],
)
def test_max_tool_invocations_stops_the_call_past_it(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, limit: int, applied: bool
) -> None:
    plan = start_plan(
        sqlite_store,
        demo_action(demo, max_tool_invocations=limit),
        profile_override="ci",
        options=options,
    )
    if applied:
        assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
        assert events(sqlite_store, plan) == []
        return
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert tool_calls(sqlite_store, plan)[-1] != "local/notify"  # the 6th call is not made
    assert len(tool_calls(sqlite_store, plan)) == limit
    [approval] = pending(sqlite_store, plan)
    assert approval.kind is ApprovalKind.BUDGET_PAUSE
    assert approval.details["limit"] == "limits.max_tool_invocations"
    assert events(sqlite_store, plan) == [
        {
            "limit": "limits.max_tool_invocations",
            "allowed": limit,
            "used": limit + 1,
            "action": "pause",
        }
    ]
    assert not greeting_landed(demo)


def test_approving_a_budget_pause_raises_the_limit_and_the_plan_goes_on(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    plan = start_plan(
        sqlite_store,
        demo_action(demo, max_tool_invocations=2),
        profile_override="ci",
        options=options,
    )
    [first] = pending(sqlite_store, plan)
    assert "the limit moves to 5" in first.question
    answer_approval(sqlite_store, first.approval_id, approve=True, by="alice")
    plan = resume_plan(sqlite_store, plan.plan_id, options)
    assert plan.state is PlanState.AWAITING_APPROVAL
    assert len(tool_calls(sqlite_store, plan)) == 5  # 2 allowed, then up to 5
    [second] = pending(sqlite_store, plan)
    assert second.details["used"] == 6
    answer_approval(sqlite_store, second.approval_id, approve=True, by="alice")
    plan = resume_plan(sqlite_store, plan.plan_id, options)
    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    assert len(tool_calls(sqlite_store, plan)) == DEMO_TOOL_CALLS
    assert [e["used"] for e in events(sqlite_store, plan)] == [3, 6]


@pytest.mark.parametrize(
    ("limit", "applied"),
    [(DEMO_TOOL_CALLS - 1, False), (DEMO_TOOL_CALLS, True)],
    ids=["below", "at"],
)
def test_actor_max_tool_calls_per_invocation(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, limit: int, applied: bool
) -> None:
    action = demo_action(
        demo, on_exceed="terminate", actor={"max_tool_calls_per_invocation": limit}
    )
    plan = start_plan(sqlite_store, action, profile_override="ci", options=options)
    if applied:
        assert plan.state is PlanState.APPLIED
        return
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.ERRORED)
    assert len(tool_calls(sqlite_store, plan)) == limit
    [event] = events(sqlite_store, plan)
    assert event["limit"] == "limits.actor.max_tool_calls_per_invocation"
    assert not greeting_landed(demo)


def test_max_wall_clock_seconds_terminates_a_plan_past_it(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    """A microsecond of wall clock: past it before the first decision is asked for."""
    action = demo_action(demo, max_wall_clock_seconds=1e-6, on_exceed="terminate")
    plan = start_plan(sqlite_store, action, profile_override="ci", options=options)
    assert (plan.phase, plan.state) == (Phase.STRATEGIZE, PlanState.ERRORED)
    [event] = events(sqlite_store, plan)
    assert event["limit"] == "limits.max_wall_clock_seconds"
    assert float(str(event["used"])) > 1e-6
    with sqlite_store.unit_of_work() as uow:
        assert [d.step_key for d in uow.decisions.for_plan(plan.plan_id)] == ["prompt"]


def test_a_generous_wall_clock_lets_the_plan_apply(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions
) -> None:
    action = demo_action(demo, max_wall_clock_seconds=86_400, on_exceed="terminate")
    plan = start_plan(sqlite_store, action, profile_override="ci", options=options)
    assert plan.state is PlanState.APPLIED


# -- safety switches -----------------------------------------------------------------------------


@pytest.mark.parametrize("on", [True, False], ids=["on", "off"])
def test_require_human_approval_stops_before_each_decision(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, on: bool
) -> None:
    profile = register(sqlite_store, "humans", safety={"require_human_approval": on})
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override=profile, options=options
    )
    if not on:
        assert plan.state is PlanState.APPLIED
        return
    assert (plan.phase, plan.state) == (Phase.STRATEGIZE, PlanState.AWAITING_APPROVAL)
    [approval] = pending(sqlite_store, plan)
    assert approval.kind is ApprovalKind.ESCALATION
    assert "safety.require_human_approval" in approval.question
    answer_approval(sqlite_store, approval.approval_id, approve=True, by="alice")
    plan = resume_plan(sqlite_store, plan.plan_id, options)
    [following] = pending(sqlite_store, plan)  # the next decision asks again
    assert following.approval_id != approval.approval_id
    assert "safety.require_human_approval" in following.question
    assert not greeting_landed(demo)


@pytest.mark.parametrize("on", [True, False], ids=["on", "off"])
def test_require_approval_for_apply_stops_at_the_apply_gate(
    demo: DemoEnvironment, sqlite_store: Store, options: RunOptions, on: bool
) -> None:
    profile = register(sqlite_store, "apply-gate", guards={"require_approval_for_apply": on})
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override=profile, options=options
    )
    if not on:
        assert plan.state is PlanState.APPLIED
        return
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    [gate] = pending(sqlite_store, plan)
    assert gate.kind is ApprovalKind.APPLY_GATE
    assert "guards.require_approval_for_apply" in gate.question
    assert not greeting_landed(demo)
    answer_approval(sqlite_store, gate.approval_id, approve=True, by="alice")
    assert resume_plan(sqlite_store, plan.plan_id, options).state is PlanState.APPLIED


# -- retries -------------------------------------------------------------------------------------


def files(store: Store, tmp_path: Path) -> Path:
    """A folder registered as the resource ``local/files``."""
    folder = tmp_path / "files"
    folder.mkdir()
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id="local/files",
                kind="filesystem",
                location=str(folder),
                sandbox_strategy="filesystem_copy",
            )
        )
        uow.commit()
    return folder


def writing_action(resource: str = "local/files", **limits: Any) -> Action:
    """Two Execute decisions, each writing a file to ``resource``. To ``local/missing``, a
    resource that does not exist, each call fails, and every call after the first (a retry,
    or the next decision's) retries the same tool."""
    broken = {
        "tool": "local/write-file",
        "arguments": {"resource": resource, "path": "a.txt", "content": "a"},
    }
    return Action.model_validate(
        {
            "name": "local/writing",
            "prompt": "Write a file where it cannot go",
            "resources": ["local/files"],
            "tools": ["local/write-file"],
            "limits": limits,
            "decisions": [
                {
                    "key": key,
                    "type": "implementation_choice",
                    "question": f"Write {key}",
                    "alternatives": [{"option": f"write {key}", "tool_calls": [broken]}],
                }
                for key in ("first", "second")
            ],
        }
    )


@pytest.mark.parametrize(("retries", "stopped"), [(0, True), (100, False)], ids=["below", "at"])
def test_actor_max_retries_per_tool(  # on SQLite and PostgreSQL (the ``store`` fixture)
    store: Store, options: RunOptions, tmp_path: Path, retries: int, stopped: bool
) -> None:
    files(store, tmp_path)
    action = writing_action(
        "local/missing", on_exceed="terminate", actor={"max_retries_per_tool": retries}
    )
    plan = start_plan(store, action, profile_override="ci", options=options)
    if not stopped:
        assert events(store, plan) == []
        assert len(tool_calls(store, plan)) >= 2
        return
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.ERRORED)
    assert tool_calls(store, plan) == ["local/write-file"]  # no retry was made
    assert events(store, plan) == [
        {
            "limit": "limits.actor.max_retries_per_tool",
            "allowed": 0,
            "used": 1,
            "action": "terminate",
        }
    ]


def test_a_guard_cost_cap_of_zero_asks_before_each_call_then_the_plan_goes_on(
    sqlite_store: Store, options: RunOptions, tmp_path: Path
) -> None:
    """A guard's cap reached at $0 (the scripted reasoner costs nothing): each call asks,
    the second after the first was approved too; approved, the plan goes on."""
    profile = register(sqlite_store, "zero-cap", guards={"max_total_cost": 0})
    folder = files(sqlite_store, tmp_path)
    plan = start_plan(sqlite_store, writing_action(), profile_override=profile, options=options)
    for made in range(2):
        assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
        assert tool_calls(sqlite_store, plan) == ["local/write-file"] * made
        [approval] = pending(sqlite_store, plan)
        assert approval.kind is ApprovalKind.GUARD and "(max_total_cost)" in approval.question
        answer_approval(sqlite_store, approval.approval_id, approve=True, by="alice")
        plan = resume_plan(sqlite_store, plan.plan_id, options)
    assert plan.state is PlanState.APPLIED
    assert tool_calls(sqlite_store, plan) == ["local/write-file", "local/write-file"]
    assert (folder / "a.txt").read_text(encoding="utf-8") == "a"
