"""A plan runs for real: Strategize → Execute → Apply on the demo's real resources."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from cleveragents_tui.actors.checkpointer import actor_database_path, open_checkpointer
from cleveragents_tui.actors.graphs import Actor
from cleveragents_tui.actors.notes import RESULT, keys_in_notes
from cleveragents_tui.domain.enums import CheckpointType, Phase, PlanState
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.ops.doctor import run_checks
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.support.store_rows import plan_groups


@pytest.fixture
def demo(tmp_path: Path, store: Store) -> DemoEnvironment:
    """The demo on both stores: SQLite (SqliteSaver) and PostgreSQL (PostgresSaver)."""
    return build_demo(store, tmp_path / "demo")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def rows(database: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT version, notes FROM releases ORDER BY id").fetchall()


def test_the_demo_plan_runs_to_the_apply_gate_then_applies(
    demo: DemoEnvironment, store: Store, tmp_path: Path
) -> None:
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    head_before = git(demo.repository, "rev-parse", "HEAD")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with store.unit_of_work() as uow:
        decisions = uow.decisions.for_plan(plan.plan_id)
        [child] = uow.plans.children(plan.plan_id)
        [gate] = uow.approvals.pending(plan.plan_id)
        execute = [d for d in decisions if d.phase is Phase.EXECUTE]
        groups = {g.decision_id: g for g in plan_groups(store, plan.plan_id)}
        checkpoints = {d.decision_id: uow.checkpoints.for_decision(d.decision_id) for d in execute}
        invocations = {
            d.step_key: uow.tool_invocations.for_decision(d.decision_id) for d in execute
        }
    assert gate.kind.value == "apply_gate"
    assert [d.step_key for d in decisions] == [
        "prompt",
        "keep-api",
        "strategy",
        "docs",
        "implement-function",
        "test",
        "record",
        "announce",
    ]
    assert child.state is PlanState.COMPLETED and child.automation_profile == "auto"
    for decision in execute:  # no Execute decision without a committed checkpoint group
        assert groups[decision.decision_id].status.value == "committed"
    # the last decision's group covers every resource written before it
    last = checkpoints[execute[-1].decision_id]
    assert {c.resource_id.split("/")[1] for c in last} == {"hello-cli", "app-db"}
    assert all(c.checkpoint_type is CheckpointType.DECISION_POINT for c in last)
    assert [i.tool for i in invocations["announce"]] == ["local/notify"]
    assert invocations["announce"][0].irreversible
    assert all(i.ok for calls in invocations.values() for i in calls), invocations

    # nothing has reached the real resources yet, except the irreversible notification
    assert git(demo.repository, "rev-parse", "HEAD") == head_before
    assert git(demo.repository, "status", "--porcelain") == ""
    assert rows(demo.database) == [("1.0.0", "first release")]
    assert "hello-cli 1.1.0" in (demo.outbox / "outbox.jsonl").read_text()
    assert run_checks(store, tmp_path / "sandboxes").problems == []

    runner = PlanRunner(store, plan.plan_id, options)
    applied = runner.apply()
    assert (applied.phase, applied.state) == (Phase.APPLY, PlanState.APPLIED)
    assert rows(demo.database) == [("1.0.0", "first release"), ("1.1.0", "hello NAME command")]
    branches = git(demo.repository, "branch", "--list", "cleveragents/apply/*")
    assert plan.plan_id in branches
    assert "Hello, {name}!" in git(
        demo.repository, "show", f"cleveragents/apply/{plan.plan_id}:hello_cli/greet.py"
    )
    assert "## hello" in (demo.docs / "guide.md").read_text()


def test_every_execute_decision_can_restore_the_actor_state_it_was_made_from(
    demo: DemoEnvironment, store: Store, tmp_path: Path
) -> None:
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    with store.unit_of_work() as uow:
        execute = [d for d in uow.decisions.for_plan(plan.plan_id) if d.phase is Phase.EXECUTE]
    if store.engine.dialect.name == "postgresql":  # PostgresSaver shares the team database
        with store.engine.connect() as connection:
            saved = connection.exec_driver_sql("SELECT count(*) FROM checkpoints").scalar_one()
        assert saved > len(execute)
    else:  # SqliteSaver keeps its own file beside the store
        assert actor_database_path(str(store.engine.url.database)).is_file()
    with open_checkpointer(store.engine.url) as saver:
        actor = Actor(saver, plan.plan_id, Phase.EXECUTE, lambda state, ref: {})
        for number, decision in enumerate(execute):
            ref = decision.context_snapshot.actor_state_ref
            assert ref is not None
            state = actor.load(ref)
            assert state["position"] == number  # the state before this decision was made
            # the notes name the keys already taken: the chat reasoner reads them back
            assert keys_in_notes(state["notes"]) == tuple(d.step_key for d in execute[:number])
            # and what the calls of each decision before it returned
            results = [n.split(":", 1)[0] for n in state["notes"] if n.startswith(RESULT)]
            with store.unit_of_work() as uow:
                calls = [
                    f"{RESULT}{d.step_key} call {n}"
                    for d in execute[:number]
                    for n, _ in enumerate(uow.tool_invocations.for_decision(d.decision_id), 1)
                ]
            assert results == calls


def test_strategize_changes_nothing_on_disk_or_in_the_database(
    demo: DemoEnvironment, store: Store, tmp_path: Path
) -> None:
    action = load_action(str(demo.action_file))
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    before = {
        p: p.read_bytes()
        for p in demo.directory.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }
    plan = start_plan(store, action, profile_override="supervised", options=options)
    # supervised: Strategize runs by itself, Execute waits for a person
    assert (plan.phase, plan.state) == (Phase.STRATEGIZE, PlanState.AWAITING_APPROVAL)
    after = {
        p: p.read_bytes()
        for p in demo.directory.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }
    assert after == before
    assert not (tmp_path / "sandboxes").exists() or not any(
        (tmp_path / "sandboxes").rglob("*.json")
    )
    doc = json.loads(json.dumps([p.name for p in after]))
    assert "app.db" in doc


def test_apply_refused_by_a_changed_real_folder_leaves_the_plan_constrained(
    demo: DemoEnvironment, store: Store, tmp_path: Path
) -> None:
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    (demo.docs / "guide.md").write_text("# edited by a person meanwhile\n")  # the child's target
    result = PlanRunner(store, plan.plan_id, options).apply()
    assert (result.phase, result.state) == (Phase.APPLY, PlanState.CONSTRAINED)
    assert (
        demo.docs / "guide.md"
    ).read_text() == "# edited by a person meanwhile\n"  # not overwritten


def test_a_refused_apply_is_retried_once_the_real_resource_is_put_right(
    demo: DemoEnvironment, store: Store, tmp_path: Path
) -> None:
    from cleveragents_tui.engine.run.lifecycle import resume_plan

    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    guide = demo.docs / "guide.md"
    original = guide.read_bytes()
    guide.write_text("# edited by a person meanwhile\n")
    refused = PlanRunner(store, plan.plan_id, options).apply()
    assert refused.state is PlanState.CONSTRAINED
    guide.write_bytes(original)  # the person puts it back
    retried = resume_plan(store, plan.plan_id, options)
    assert (retried.phase, retried.state) == (Phase.APPLY, PlanState.APPLIED)
    assert guide.read_bytes() != original  # the child's change landed this time
    assert git(demo.repository, "branch", "--list", f"cleveragents/apply/{plan.plan_id}")
    assert rows(demo.database)[-1][0]  # the release row was committed


def test_apply_before_execute_completes_is_refused(
    demo: DemoEnvironment, store: Store, tmp_path: Path
) -> None:
    from cleveragents_tui.engine.run.errors import PlanStateError

    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="supervised", options=options
    )
    with pytest.raises(PlanStateError, match="Execute has not completed"):
        PlanRunner(store, plan.plan_id, options).apply()
