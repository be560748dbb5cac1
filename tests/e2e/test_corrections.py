"""Corrections, as scenarios (given / when / then) on the demo's real resources.

One scenario per bullet of ADR-035's Compliance section that the earlier suites do not
already cover (checkpoint linkage, group atomicity, cross-sandbox rollback and pruning are in
tests/engine/test_checkpoint_groups.py).
"""

from __future__ import annotations

import pytest

from cleveragents_tui.domain.enums import CorrectionMode, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import (
    ChildAction,
    CorrectionRefusedError,
    StalePreviewError,
)
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.engine.ops.doctor import run_checks
from cleveragents_tui.engine.run.plans import change_profile
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store

GREETER = "use a greeter class so we can add languages"


def run_demo(
    store: Store, demo: DemoEnvironment, options: RunOptions, profile: str = "auto"
) -> Plan:
    return start_plan(
        store, load_action(str(demo.action_file)), profile_override=profile, options=options
    )


def decisions_by_key(store: Store, plan_id: str, current_only: bool = True) -> dict[str, str]:
    with store.unit_of_work() as uow:
        return {
            d.step_key: d.decision_id
            for d in uow.decisions.for_plan(plan_id, include_superseded=not current_only)
            if d.step_key
        }


def test_mid_strategize_correction_replays_the_strategy_with_the_guidance(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given a plan that finished Strategize and waits before Execute (supervised)
    plan = run_demo(sqlite_store, demo, options, profile="supervised")
    assert (plan.phase, plan.state) == (Phase.STRATEGIZE, PlanState.AWAITING_APPROVAL)
    before = decisions_by_key(sqlite_store, plan.plan_id)
    # When the strategy decision is reverted with guidance
    impact = preview(sqlite_store, before["strategy"], CorrectionMode.REVERT, GREETER)
    assert impact.rollbackable == () and impact.phase_change is None  # nothing to roll back
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    # Then the strategy is re-made from the restored actor state, following the guidance
    assert result.correction.status.value == "succeeded"
    with sqlite_store.unit_of_work() as uow:
        old = uow.decisions.get(before["strategy"])
        current = uow.decisions.for_plan(plan.plan_id, include_superseded=False)
        plan_now = uow.plans.get(plan.plan_id)
    strategy = next(d for d in current if d.step_key == "strategy")
    assert strategy.chosen_option == "A greeter class with a configurable greeting"
    assert strategy.is_correction and strategy.corrects_decision_id == before["strategy"]
    assert old.superseded_by == result.correction.replacement_decision_id
    guidance = next(
        d for d in current if d.decision_id == result.correction.replacement_decision_id
    )
    assert (guidance.decision_type.value, guidance.chosen_option) == ("user_intervention", GREETER)
    assert (
        next(d for d in current if d.step_key == "keep-api").decision_id == before["keep-api"]
    )  # untouched
    assert plan_now.attempt == 2
    assert (plan_now.phase, plan_now.state) == (
        Phase.STRATEGIZE,
        PlanState.AWAITING_APPROVAL,
    )  # gated again
    assert not (demo.directory / "hello-cli" / "hello_cli" / "greet.py").exists()


def test_mid_execute_correction_restores_every_resource_to_the_decision_and_keeps_siblings(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the demo at its Apply gate
    plan = run_demo(sqlite_store, demo, options)
    before = decisions_by_key(sqlite_store, plan.plan_id)
    # and a profile that stops before every Execute decision, so the state right after the
    # rollback can be inspected before anything is replayed
    change_profile(sqlite_store, plan.plan_id, "supervised")
    # When the `record` decision (the SQL insert) is reverted
    impact = preview(
        sqlite_store, before["record"], CorrectionMode.REVERT, "record it as 1.1.0-rc1"
    )
    assert set(impact.affected_decisions) == {before["record"], before["announce"]}
    assert [e.tool for e in impact.irreversible] == ["local/notify"]
    assert any("irreversible external effects" in w for w in impact.warnings)
    # the team chat was written after `record`: those changes cannot be rolled back
    assert impact.non_rollbackable == (f"{demo.namespace}/team-chat",)
    assert any("cannot be rolled back (sandbox strategy: none)" in w for w in impact.warnings)
    with pytest.raises(CorrectionRefusedError, match="warning"):
        execute(sqlite_store, impact, acknowledged=False, requested_by="maria", options=options)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    assert result.correction.status.value == "succeeded"
    assert result.plan.state is PlanState.AWAITING_APPROVAL and result.plan.phase is Phase.EXECUTE
    # Then every resource is exactly as when `record` was recorded
    runner = PlanRunner(sqlite_store, plan.plan_id, options)
    db = runner.sandboxes.get(f"{demo.namespace}/app-db")
    rows = [tuple(r) for r in db.execute("SELECT version FROM releases ORDER BY id")]  # type: ignore[attr-defined]
    assert rows == [("1.0.0",)]
    repo = runner.sandboxes.get(f"{demo.namespace}/hello-cli").workdir
    assert repo is not None and (repo / "tests" / "test_hello.py").exists()  # `test` came before
    assert "Hello, {name}!" in (repo / "hello_cli" / "greet.py").read_text()
    # decisions before it untouched, the sibling branches still current, not re-run
    after = decisions_by_key(sqlite_store, plan.plan_id)
    for key in ("prompt", "keep-api", "strategy", "docs", "implement-function", "test"):
        assert after[key] == before[key]
    assert "record" not in after and "announce" not in after
    with sqlite_store.unit_of_work() as uow:
        [child] = uow.plans.children(plan.plan_id)
        correction = uow.corrections.get(result.correction.correction_id)
    assert child.state is PlanState.COMPLETED  # the docs child was not affected
    assert correction.report["resources"] and correction.attempt == 2
    assert run_checks(sqlite_store, options.sandbox_base).problems == []


def test_a_stale_preview_is_refused(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = run_demo(sqlite_store, demo, options)
    keys = decisions_by_key(sqlite_store, plan.plan_id)
    impact = preview(sqlite_store, keys["announce"], CorrectionMode.REVERT, "say it louder")
    change_profile(sqlite_store, plan.plan_id, "auto")  # someone changed the plan meanwhile
    with pytest.raises(StalePreviewError, match="changed since the preview"):
        execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    with sqlite_store.unit_of_work() as uow:
        assert uow.corrections.for_plan(plan.plan_id) == []


def test_an_applied_plan_cannot_be_reverted(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = run_demo(sqlite_store, demo, options)
    keys = decisions_by_key(sqlite_store, plan.plan_id)
    PlanRunner(sqlite_store, plan.plan_id, options).apply()
    with pytest.raises(
        CorrectionRefusedError, match=r"applied changes cannot be reverted.*--mode=append"
    ):
        preview(sqlite_store, keys["record"], CorrectionMode.REVERT, "anything")


def test_cascade_cancels_a_completed_child_and_rolls_back_its_sandbox(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = run_demo(sqlite_store, demo, options, profile="auto")
    keys = decisions_by_key(sqlite_store, plan.plan_id)
    impact = preview(sqlite_store, keys["strategy"], CorrectionMode.REVERT, GREETER)
    [child] = impact.children
    assert child.outcome is ChildAction.CANCEL_AND_ROLL_BACK
    assert impact.phase_change == (Phase.EXECUTE, Phase.STRATEGIZE)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    assert result.correction.status.value == "succeeded"
    with sqlite_store.unit_of_work() as uow:
        children = uow.plans.children(plan.plan_id)
    cancelled = [c for c in children if c.plan_id == child.plan_id]
    assert cancelled[0].state is PlanState.CANCELLED
    # the replay re-made the strategy with the guidance and spawned a new docs child
    now = decisions_by_key(sqlite_store, plan.plan_id)
    assert "implement-class" in now and "implement-function" not in now
    assert any(c.state is PlanState.COMPLETED for c in children if c.plan_id != child.plan_id)


@pytest.mark.parametrize(
    ("state", "outcome"),
    [("created", ChildAction.CANCEL), ("running", ChildAction.CANCEL_AND_ROLL_BACK)],
)
def test_children_not_started_or_in_progress(
    sqlite_store: Store,
    demo: DemoEnvironment,
    options: RunOptions,
    state: str,
    outcome: ChildAction,
) -> None:
    plan = run_demo(sqlite_store, demo, options)
    keys = decisions_by_key(sqlite_store, plan.plan_id)
    with sqlite_store.unit_of_work(write=True) as uow:
        [child] = uow.plans.children(plan.plan_id)
        uow.plans.save(child.model_copy(update={"state": state}))
        uow.commit()
    impact = preview(sqlite_store, keys["docs"], CorrectionMode.REVERT, "no docs child")
    assert [c.outcome for c in impact.children] == [outcome]


def test_an_applied_child_rejects_the_parents_revert_but_allows_append(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = run_demo(sqlite_store, demo, options)
    keys = decisions_by_key(sqlite_store, plan.plan_id)
    with sqlite_store.unit_of_work(write=True) as uow:
        [child] = uow.plans.children(plan.plan_id)
        uow.plans.save(child.model_copy(update={"phase": "apply", "state": "applied"}))
        uow.commit()
    with pytest.raises(CorrectionRefusedError, match=r"already applied.*--mode=append"):
        preview(sqlite_store, keys["docs"], CorrectionMode.REVERT, "no docs child")
    impact = preview(
        sqlite_store, keys["docs"], CorrectionMode.APPEND, "also document the version command"
    )
    # history is left intact: an append supersedes nothing; the appended plan re-makes the
    # spawn (and spawns the docs child again) — it does not re-run the plan's action
    assert impact.affected_decisions == () and impact.children == ()
    assert impact.append is not None and [s.key for s in impact.append.steps] == ["docs"]


def test_append_leaves_history_intact_and_runs_a_corrective_child(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    plan = run_demo(sqlite_store, demo, options)
    before = decisions_by_key(sqlite_store, plan.plan_id)
    impact = preview(sqlite_store, before["strategy"], CorrectionMode.APPEND, GREETER)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    assert result.correction.appended_plan_id is not None
    assert decisions_by_key(sqlite_store, plan.plan_id) == before  # nothing superseded
    with sqlite_store.unit_of_work() as uow:
        appended = uow.plans.get(result.correction.appended_plan_id)
        chosen = {d.step_key: d.chosen_option for d in uow.decisions.for_plan(appended.plan_id)}
    assert appended.parent_plan_id == plan.plan_id
    assert chosen["strategy"] == "A greeter class with a configurable greeting"


def test_a_constrained_apply_can_be_corrected_back_into_execute(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given an Apply that a changed real folder refused (the plan is constrained in Apply)
    plan = run_demo(sqlite_store, demo, options)
    keys = decisions_by_key(sqlite_store, plan.plan_id)
    (demo.docs / "guide.md").write_text("# edited meanwhile\n")
    constrained = PlanRunner(sqlite_store, plan.plan_id, options).apply()
    assert (constrained.phase, constrained.state) == (Phase.APPLY, PlanState.CONSTRAINED)
    # When an Execute decision is reverted
    impact = preview(sqlite_store, keys["announce"], CorrectionMode.REVERT, "announce it later")
    assert impact.phase_change == (Phase.APPLY, Phase.EXECUTE)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)
    # Then the plan is back in Execute, replayed to the Apply gate of the new attempt
    assert result.correction.status.value == "succeeded"
    assert (result.plan.phase, result.plan.state, result.plan.attempt) == (
        Phase.EXECUTE,
        PlanState.AWAITING_APPROVAL,
        2,
    )
