"""Append is a corrective child plan (issue 14, finding 5), on the demo's real resources.

An append starts from the plan's current state, runs only the corrective work the guidance
asks for — never the plan's action again — and warns about the irreversible effects that
work repeats. Checked on what a user gets: the applied branch in the real repository, the
rows in the real database, the lines in the team chat's outbox.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import CorrectionMode, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionRefusedError
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store

GREETER = "use a greeter class so we can add languages"


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


@pytest.fixture
def demo(tmp_path: Path, sqlite_store: Store) -> DemoEnvironment:
    return build_demo(sqlite_store, tmp_path / "demo")


def run_demo(store: Store, demo: DemoEnvironment, options: RunOptions) -> Plan:
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    return plan


def keys(store: Store, plan_id: str) -> dict[str, str]:
    """Step key -> decision id of the plan's current decisions."""
    with store.unit_of_work() as uow:
        return {k: d for k, (d, _) in uow.decisions.current_steps(plan_id).items()}


def chosen(store: Store, plan_id: str) -> dict[str, str]:
    with store.unit_of_work() as uow:
        return {k: option for k, (_, option) in uow.decisions.current_steps(plan_id).items()}


def git(repository: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repository), *args], check=True, capture_output=True, text=True
    ).stdout


def branch_file(demo: DemoEnvironment, plan_id: str, path: str) -> str:
    return git(demo.repository, "show", f"cleveragents/apply/{plan_id}:{path}")


def releases(demo: DemoEnvironment) -> list[tuple[str, str]]:
    with sqlite3.connect(demo.database) as connection:
        rows = connection.execute("SELECT version, notes FROM releases ORDER BY id").fetchall()
    connection.close()
    return [(str(v), str(n)) for v, n in rows]


def notifications(demo: DemoEnvironment) -> int:
    outbox = demo.outbox / "outbox.jsonl"
    return len(outbox.read_text("utf-8").splitlines()) if outbox.exists() else 0


def reverted_to_greeter(store: Store, demo: DemoEnvironment, options: RunOptions) -> Plan:
    """The demo at its Apply gate, its strategy reverted to the greeter class."""
    plan = run_demo(store, demo, options)
    impact = preview(store, keys(store, plan.plan_id)["strategy"], CorrectionMode.REVERT, GREETER)
    result = execute(store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status.value == "succeeded"
    assert (
        chosen(store, plan.plan_id)["implement-class"] == "hello_cli/greet.py with a Greeter class"
    )
    return result.plan


def test_append_after_a_revert_keeps_the_reverted_code_and_repeats_nothing(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the demo whose strategy was reverted to the greeter class
    plan = reverted_to_greeter(sqlite_store, demo, options)
    before = keys(sqlite_store, plan.plan_id)
    sent = notifications(demo)
    # When a corrective plan is appended to the test step (run it again)
    impact = preview(
        sqlite_store, before["test"], CorrectionMode.APPEND, "run the suite again", choose=1
    )
    # Then the preview says what it will do: nothing superseded, one step, in the sandboxes
    assert impact.affected_decisions == () and impact.children == ()
    assert impact.append is not None
    assert [(s.key, s.chosen_option) for s in impact.append.steps] == [
        ("test", "A unit test, then the whole suite")
    ]
    assert impact.append.sandbox_host == plan.plan_id and not impact.append.applies_on_its_own
    assert impact.irreversible == () and impact.warnings == ()
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status.value == "succeeded"
    appended = result.correction.appended_plan_id
    assert appended is not None
    # only the corrective work ran: the appended plan made the test step and nothing else
    assert set(chosen(sqlite_store, appended)) == {"prompt", "test"}
    assert keys(sqlite_store, plan.plan_id) == before  # history untouched
    assert notifications(demo) == sent  # no notification sent again
    # and the plan, applied once with the appended work, keeps the greeter and one release row
    assert (result.plan.phase, result.plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    applied = apply_plan(sqlite_store, plan.plan_id, "ana", options)
    assert applied.state is PlanState.APPLIED
    assert "class Greeter" in branch_file(demo, plan.plan_id, "hello_cli/greet.py")
    assert "def test_greets_by_name" in branch_file(demo, plan.plan_id, "tests/test_hello.py")
    assert releases(demo).count(("1.1.0", "hello NAME command")) == 1
    assert notifications(demo) == sent


def test_append_that_repeats_a_notification_warns_and_sends_exactly_one(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = reverted_to_greeter(sqlite_store, demo, options)
    before = keys(sqlite_store, plan.plan_id)
    sent = notifications(demo)
    impact = preview(
        sqlite_store, before["announce"], CorrectionMode.APPEND, "announce it again", choose=1
    )
    assert [(e.tool, e.invocations) for e in impact.irreversible] == [("local/notify", 1)]
    assert any("The appended plan repeats work" in w for w in impact.warnings)
    with pytest.raises(CorrectionRefusedError, match="warning"):
        execute(sqlite_store, impact, acknowledged=False, requested_by="ana", options=options)
    assert notifications(demo) == sent
    execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert notifications(demo) == sent + 1
    apply_plan(sqlite_store, plan.plan_id, "ana", options)
    assert releases(demo).count(("1.1.0", "hello NAME command")) == 1
    assert "class Greeter" in branch_file(demo, plan.plan_id, "hello_cli/greet.py")


def test_append_to_the_strategy_runs_only_the_work_of_the_new_choice(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the demo (a plain function) at its Apply gate
    plan = run_demo(sqlite_store, demo, options)
    before = keys(sqlite_store, plan.plan_id)
    sent = notifications(demo)
    # When a greeter class is appended to the strategy
    impact = preview(sqlite_store, before["strategy"], CorrectionMode.APPEND, GREETER)
    assert impact.append is not None
    assert [(s.key, s.chosen_option) for s in impact.append.steps] == [
        ("strategy", "A greeter class with a configurable greeting"),
        ("implement-class", "hello_cli/greet.py with a Greeter class"),
    ]
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    appended = result.correction.appended_plan_id
    assert appended is not None
    # Then the appended plan made the strategy and its implementation, and nothing else
    assert set(chosen(sqlite_store, appended)) == {"prompt", "strategy", "implement-class"}
    assert keys(sqlite_store, plan.plan_id) == before
    apply_plan(sqlite_store, plan.plan_id, "ana", options)
    assert "class Greeter" in branch_file(demo, plan.plan_id, "hello_cli/greet.py")
    assert '"hello"' in branch_file(demo, plan.plan_id, "hello_cli/app.py")
    assert "def test_greets_by_name" in branch_file(demo, plan.plan_id, "tests/test_hello.py")
    assert releases(demo).count(("1.1.0", "hello NAME command")) == 1
    assert notifications(demo) == sent


def test_append_to_an_applied_plan_applies_on_its_own_branch(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the demo applied, and its apply branch merged as the apply summary says
    plan = run_demo(sqlite_store, demo, options)
    before = keys(sqlite_store, plan.plan_id)
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED
    git(demo.repository, "merge", "--ff-only", "-q", f"cleveragents/apply/{plan.plan_id}")
    sent = notifications(demo)
    # When a greeter class is appended to its strategy
    impact = preview(sqlite_store, before["strategy"], CorrectionMode.APPEND, GREETER)
    assert impact.append is not None
    assert impact.append.sandbox_host is None and impact.append.applies_on_its_own
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status.value == "succeeded"
    appended = result.correction.appended_plan_id
    assert appended is not None
    with sqlite_store.unit_of_work() as uow:
        waiting = uow.plans.get(appended)
        assert uow.plans.get(plan.plan_id).state is PlanState.APPLIED  # the plan stays applied
    # Then the appended plan waits at its own Apply gate, and lands on its own branch
    assert (waiting.phase, waiting.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    landed = apply_plan(sqlite_store, appended, "ana", options)
    assert (landed.phase, landed.state) == (Phase.APPLY, PlanState.APPLIED)
    assert "class Greeter" in branch_file(demo, appended, "hello_cli/greet.py")
    assert "def test_greets_by_name" in branch_file(demo, appended, "tests/test_hello.py")
    assert "def hello(name" in branch_file(demo, plan.plan_id, "hello_cli/greet.py")  # untouched
    assert releases(demo).count(("1.1.0", "hello NAME command")) == 1
    assert notifications(demo) == sent


def test_append_while_the_plan_is_in_strategize_is_refused(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = start_plan(
        sqlite_store,
        load_action(str(demo.action_file)),
        profile_override="supervised",
        options=options,
    )
    assert plan.phase is Phase.STRATEGIZE
    strategy = keys(sqlite_store, plan.plan_id)["strategy"]
    with pytest.raises(CorrectionRefusedError, match=r"still in Strategize.*--mode=revert"):
        preview(sqlite_store, strategy, CorrectionMode.APPEND, GREETER)


def test_append_to_the_root_leaves_the_work_to_the_actor_and_warns_of_what_it_may_repeat(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = run_demo(sqlite_store, demo, options)
    root = keys(sqlite_store, plan.plan_id)["prompt"]
    sent = notifications(demo)
    impact = preview(sqlite_store, root, CorrectionMode.APPEND, "also a --shout flag")
    assert impact.append is not None and not impact.append.predicted
    assert impact.append.steps == ()
    assert [e.tool for e in impact.irreversible] == ["local/notify"]  # the action may call it
    assert any("The appended plan may repeat work" in w for w in impact.warnings)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    appended = result.correction.appended_plan_id
    assert appended is not None
    assert set(chosen(sqlite_store, appended)) == {"prompt"}  # the scripted reasoner: nothing
    assert notifications(demo) == sent
