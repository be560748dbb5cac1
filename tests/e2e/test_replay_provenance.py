"""A correction's replay keeps its provenance whoever goes on with it (issue 20, item 4).

A revert replays the plan from the rollback to the end of Execute. Under the `supervised`
profile the replay stops before every Execute decision; approving and going on with
`agents plan run` — in another process, after a pause, after a crash and `agents doctor
--repair` — makes the rest of it. Every decision made in place of a superseded one carries
the correction (``is_correction``, ``corrects_decision_id``, a ``decision_remade`` event),
and `agents plan diff --correction` lists them and compares the state the replay ended in.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from cleveragents_tui.domain.enums import CorrectionMode, PlanState
from cleveragents_tui.engine.core.diff import correction_diff
from cleveragents_tui.engine.core.replay_snapshots import current_replay
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.engine.run.plans import change_profile
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.failpoints import ENV_VAR
from cleveragents_tui.store.store import Store
from tests.e2e.test_correction_diff import DOCUMENTED, GREET, _action_with_a_documented_hello

# The demo's decisions a revert of its implementation re-makes: the implementation, and
# those that wrote to the resources rolled back (the test, the release row) or depend on them.
REMADE = ["implement-function", "test", "record", "announce"]


def agents(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`agents ARGS` in a process of its own, on the test's database and sandboxes."""
    done = subprocess.run(
        [sys.executable, "-m", "cleveragents_tui", *args],
        env={
            **{k: v for k, v in os.environ.items() if k != ENV_VAR},
            "AGENTS_DATABASE_URL": str(tmp_path / "agents.db"),
            "AGENTS_SANDBOX_DIR": str(tmp_path / "sandboxes"),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if env and ENV_VAR in env:  # a crash on purpose
        assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    else:
        assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def at_apply_gate(store: Store, demo: DemoEnvironment, options: RunOptions, tmp_path: Path) -> str:
    """The demo plan (with a documented alternative for its implementation) at Apply."""
    action = load_action(str(_action_with_a_documented_hello(demo, tmp_path)))
    plan = start_plan(store, action, profile_override="auto", options=options)
    assert plan.state is PlanState.AWAITING_APPROVAL
    return plan.plan_id


def current(store: Store, plan_id: str) -> dict[str, str]:
    with store.unit_of_work() as uow:
        return {
            d.step_key: d.decision_id
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.step_key
        }


def pending(tmp_path: Path) -> list[tuple[str, str]]:
    """The pending approvals: (id, kind)."""
    lines = agents(tmp_path, "approval", "list").splitlines()
    return [(line.split()[0], line.split()[1]) for line in lines if line and line[0] != " "]


def go_on_until_the_apply_gate(tmp_path: Path, plan_id: str, *, pause_once: bool) -> int:
    """Approve each gate and run the plan on, each in a new process, until only the Apply
    gate waits; returns how many runs it took."""
    runs = 0
    while (waiting := pending(tmp_path)) and waiting[0][1] != "apply_gate":
        if pause_once and runs == 1:  # paused while it waits, then resumed
            agents(tmp_path, "plan", "pause", plan_id)
            agents(tmp_path, "approval", "approve", waiting[0][0])
            agents(tmp_path, "plan", "resume", plan_id)
        else:
            agents(tmp_path, "approval", "approve", waiting[0][0])
            agents(tmp_path, "plan", "run", plan_id)
        runs += 1
        assert runs <= len(REMADE), waiting
    return runs


def assert_the_replay_kept_its_provenance(
    store: Store, tmp_path: Path, plan_id: str, target: str, correction: str
) -> None:
    """Every decision made again carries the correction, each has its event, and the diff
    lists them all and compares the state the replay ended in."""
    with store.unit_of_work() as uow:
        everything = uow.decisions.for_plan(plan_id, include_superseded=True)
        events = uow.events.payloads(plan_id, "decision_remade")
    by_id = {d.decision_id: d for d in everything}
    now = current(store, plan_id)
    superseded = [d for d in everything if d.superseded_by is not None]
    assert sorted(d.step_key or "" for d in superseded) == sorted(REMADE)
    for key in REMADE:
        made = by_id[now[key]]
        assert (made.is_correction, made.corrects_decision_id, made.correction_reason) == (
            True,
            target,
            "add a docstring",
        ), key
    assert [e["key"] for e in events] == REMADE

    shown = json.loads(
        agents(tmp_path, "plan", "diff", "--correction", correction, "--format=json")
    )
    assert sorted(shown["superseded"]) == sorted(d.decision_id for d in superseded)
    assert set(shown["replacements"]) == {now[k] for k in REMADE} | {
        d.decision_id for d in everything if d.decision_type.value == "user_intervention"
    }
    assert shown["unfinished"] is None
    text = agents(tmp_path, "plan", "diff", "--correction", correction)
    for line in (
        "+ implementation_choice: hello_cli/greet.py with a documented hello() function",
        "+ tool_invocation: A unit test, then the whole suite",
        "+ tool_invocation: A row in the releases table",
        "+ tool_invocation: Notify #hello-cli",
    ):
        assert line in text, text
    # the new attempt's side is where the replay ended (the Apply gate), not its first gate
    diff = correction_diff(store, correction)
    hello_cli = next(r for r in diff.final if r.resource_id.endswith("/hello-cli"))
    greet = next(f for f in hello_cli.files if f.change.path == GREET)
    assert greet.new == DOCUMENTED
    assert diff.at_decision is not None
    code = next(r for r in diff.at_decision if r.resource_id.endswith("/hello-cli"))
    assert next(f for f in code.files if f.change.path == GREET).new == DOCUMENTED


def test_a_replay_stopped_at_gates_and_run_on_by_other_processes_keeps_its_provenance(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions, tmp_path: Path
) -> None:
    # Given the demo plan at Apply, switched to the profile that stops before every decision
    plan_id = at_apply_gate(sqlite_store, demo, options, tmp_path)
    change_profile(sqlite_store, plan_id, "supervised")
    target = current(sqlite_store, plan_id)["implement-function"]

    # When its implementation is reverted (in a process of its own): the replay stops at
    # the gate before the first decision it makes again
    out = agents(
        tmp_path,
        "plan",
        "correct",
        target,
        "--mode=revert",
        "--guidance",
        "add a docstring",
        "--yes",
    )
    correction = out.split("agents plan diff --correction ")[1].strip()
    assert "awaiting_approval" in out
    halfway = json.loads(
        agents(tmp_path, "plan", "diff", "--correction", correction, "--format=json")
    )
    assert halfway["unfinished"] is not None  # the diff says the replay has not ended
    assert "the replay has not ended" in agents(
        tmp_path, "plan", "diff", "--correction", correction
    )

    # And each gate is approved and the plan run on by another process (paused once and
    # resumed) until it waits at the Apply gate
    assert go_on_until_the_apply_gate(tmp_path, plan_id, pause_once=True) == len(REMADE)

    # Then every decision made again is the correction's, and its diff says so
    assert_the_replay_kept_its_provenance(sqlite_store, tmp_path, plan_id, target, correction)
    # And the diff, final once the replay ended, stays the same after Apply
    before = agents(tmp_path, "plan", "diff", "--correction", correction)
    agents(tmp_path, "plan", "apply", plan_id)
    assert agents(tmp_path, "plan", "diff", "--correction", correction) == before


def test_a_replay_cut_short_by_a_crash_goes_on_as_the_correction_after_doctor_repair(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions, tmp_path: Path
) -> None:
    # Given the demo plan at Apply (a profile that replays without stopping)
    plan_id = at_apply_gate(sqlite_store, demo, options, tmp_path)
    target = current(sqlite_store, plan_id)["implement-function"]

    # When the correction's process is killed once its replay has made two decisions
    agents(
        tmp_path,
        "plan",
        "correct",
        target,
        "--mode=revert",
        "--guidance",
        "add a docstring",
        "--yes",
        env={ENV_VAR: "record.recorded@execute#2=kill"},
    )
    with sqlite_store.unit_of_work() as uow:
        correction = uow.corrections.for_plan(plan_id)[-1].correction_id
    # And `agents doctor --repair` settles the correction, and the plan is resumed
    agents(tmp_path, "doctor", "--repair")
    out = agents(tmp_path, "plan", "resume", plan_id)
    assert "awaiting_approval" in out.splitlines()[0]

    # Then the decisions the resumed run made again are the correction's too
    assert_the_replay_kept_its_provenance(sqlite_store, tmp_path, plan_id, target, correction)


def test_a_later_revert_ends_an_unfinished_replay_where_it_stopped(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions, tmp_path: Path
) -> None:
    # Given a revert whose replay stopped at its first gate (supervised)
    plan_id = at_apply_gate(sqlite_store, demo, options, tmp_path)
    change_profile(sqlite_store, plan_id, "supervised")
    first_target = current(sqlite_store, plan_id)["implement-function"]
    impact = preview(sqlite_store, first_target, CorrectionMode.REVERT, "add a docstring")
    first = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    first_id = first.correction.correction_id
    assert correction_diff(sqlite_store, first_id).unfinished is not None

    # When the strategy is reverted before that replay went on
    strategy = current(sqlite_store, plan_id)["strategy"]
    impact = preview(sqlite_store, strategy, CorrectionMode.REVERT, "use a greeter class")
    second = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)

    # Then the first replay ended where it stopped: its diff is final, and a run goes on
    # with the second one
    ended = correction_diff(sqlite_store, first_id)
    assert ended.unfinished is None and ended.final
    assert current_replay(sqlite_store, plan_id) == second.correction
    PlanRunner(sqlite_store, plan_id, options).run()  # not approved: stays where it is
    assert correction_diff(sqlite_store, first_id) == ended
