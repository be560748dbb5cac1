"""A correction says what happened (issue 14, finding 4): a plan that cannot be replayed is
refused before anything changes; a correction is succeeded only once its replay has stopped
where a run stops, and failed, with the plan errored, when the replay fails; a plan left
running with nothing running it is reported by the invariant checker and repaired to paused.
"""

from __future__ import annotations

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    CorrectionStatus,
    DecisionType,
    Phase,
    PlanState,
)
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionRefusedError
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.engine.demo.demo_data import load_sample_plan
from cleveragents_tui.engine.ops.doctor import repair_left_running
from cleveragents_tui.engine.ops.invariants import check_invariants
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.plans import change_profile
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.support.run_lease import held_by_another_thread

GUIDANCE = "use a greeter class so we can add languages"


def _strategy(store: Store, plan_id: str) -> str:
    with store.unit_of_work() as uow:
        return next(
            d.decision_id
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.decision_type is DecisionType.STRATEGY_CHOICE
        )


def _finished(store: Store, plan_id: str) -> list[str]:
    """The statuses every `correction_finished` event of the plan announced, in order."""
    with store.unit_of_work() as uow:
        return [str(p["status"]) for p in uow.events.payloads(plan_id, "correction_finished")]


@pytest.fixture
def waiting(sqlite_store: Store, demo: DemoEnvironment, options: RunOptions) -> str:
    """The demo plan at its Apply gate."""
    action = load_action(str(demo.action_file))
    return start_plan(sqlite_store, action, profile_override="auto", options=options).plan_id


def test_a_sample_without_an_action_is_refused_by_every_preview(sqlite_store: Store) -> None:
    plan_id = load_sample_plan(sqlite_store)
    with sqlite_store.unit_of_work() as uow:
        decision = next(
            d
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.decision_type is DecisionType.IMPLEMENTATION_CHOICE
        )
    for mode in CorrectionMode:
        with pytest.raises(CorrectionRefusedError, match=r"no stored action to replay.*neither"):
            preview(sqlite_store, decision.decision_id, mode, "use argparse")
    with sqlite_store.unit_of_work() as uow:
        assert uow.plans.get(plan_id).state is PlanState.AWAITING_APPROVAL
        assert [c.status for c in uow.corrections.for_plan(plan_id)] == [
            CorrectionStatus.SUCCEEDED  # the one the sample records; no new one
        ]


def test_a_replay_that_fails_leaves_the_correction_failed_and_the_plan_errored(
    sqlite_store: Store, waiting: str, options: RunOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    impact = preview(
        sqlite_store, _strategy(sqlite_store, waiting), CorrectionMode.REVERT, GUIDANCE
    )
    monkeypatch.setenv(failpoints.ENV_VAR, "record.decision@execute=raise")
    failpoints.reset()
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()

    correction = result.correction
    assert correction.status is CorrectionStatus.FAILED
    assert str(correction.report["error"]).startswith("its replay failed: injected fault")
    assert result.plan.state is PlanState.ERRORED
    assert _finished(sqlite_store, waiting) == ["failed"]  # never announced as succeeded
    with sqlite_store.unit_of_work() as uow:  # the correction itself was made
        assert correction.replacement_decision_id is not None
        made = uow.decisions.get(correction.replacement_decision_id)
        assert made.is_correction and made.corrects_decision_id == impact.decision_id
        assert uow.decisions.get(impact.decision_id).superseded_by is not None
    assert check_invariants(sqlite_store, base_dir=options.sandbox_base).ok

    resumed = resume_plan(sqlite_store, waiting, options)  # what the failure says to do
    assert (resumed.phase, resumed.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with sqlite_store.unit_of_work() as uow:
        chosen = {
            d.chosen_option for d in uow.decisions.for_plan(waiting, include_superseded=False)
        }
    assert "A greeter class with a configurable greeting" in chosen
    report = check_invariants(sqlite_store, base_dir=options.sandbox_base)
    assert report.ok, report.violations


def test_a_replay_through_an_automatic_apply_succeeds_once_it_has_applied(
    sqlite_store: Store, waiting: str, options: RunOptions
) -> None:
    change_profile(sqlite_store, waiting, "full-auto")
    impact = preview(
        sqlite_store, _strategy(sqlite_store, waiting), CorrectionMode.REVERT, GUIDANCE
    )
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.plan.state is PlanState.APPLIED  # its own running correction let it apply
    assert result.correction.status is CorrectionStatus.SUCCEEDED
    assert _finished(sqlite_store, waiting) == ["succeeded"]
    report = check_invariants(sqlite_store, base_dir=options.sandbox_base)
    assert report.ok, report.violations


def test_a_plan_left_running_is_reported_and_repaired_to_paused(
    sqlite_store: Store, demo: DemoEnvironment, options: RunOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    action = load_action(str(demo.action_file))
    monkeypatch.setenv(failpoints.ENV_VAR, "record.decision@execute=raise")  # the run dies
    failpoints.reset()
    with pytest.raises(failpoints.InjectedFault):
        start_plan(sqlite_store, action, profile_override="auto", options=options)
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()
    with sqlite_store.unit_of_work() as uow:
        [plan] = [p for p in uow.plans.all() if p.parent_plan_id is None]
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.RUNNING)
    base = options.sandbox_base
    assert base is not None

    with held_by_another_thread(base, plan.plan_id, "running"):  # a live runner
        assert check_invariants(sqlite_store, base_dir=base).ok
        assert repair_left_running(sqlite_store, base) == []
    found = check_invariants(sqlite_store, base_dir=base).violations
    assert [(v.invariant, v.subject) for v in found] == [("left-running", plan.plan_id)]

    assert repair_left_running(sqlite_store, base) == [plan.plan_id]
    assert check_invariants(sqlite_store, base_dir=base).ok
    resumed = resume_plan(sqlite_store, plan.plan_id, options)
    assert (resumed.phase, resumed.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert check_invariants(sqlite_store, base_dir=base).ok
