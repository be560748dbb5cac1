"""Approving a ``max_wall_clock_seconds`` pause lets the plan go on, however long the answer took.

The wall clock counts the wait for a person. Before the fix, approving moved the limit to the
seconds at the breach plus the limit, so a person who took longer than the limit to answer
(a limit of 60 s, an answer an hour later) found the plan paused again at once, with no step
made: every approval was spent on the wait for it. Now the limit moves to the seconds at the
answer plus the limit.

The clocks are moved, not waited for: the policing's clock runs 2 minutes ahead (the plan is
past its 60 s at its first step) and the answer is recorded an hour after the question.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.engine.run import policing
from cleveragents_tui.engine.run.approvals import answer_approval
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.repositories import approvals
from cleveragents_tui.store.store import Store
from tests.e2e.test_limits_at_run_time import demo_action, events, pending

AHEAD = timedelta(minutes=2)
AN_HOUR = timedelta(hours=1)


def _clock(offset: timedelta) -> object:
    def now() -> datetime:
        return utc_now() + offset

    return now


def test_an_answer_later_than_the_limit_still_lets_the_plan_go_on(
    demo: DemoEnvironment,
    sqlite_store: Store,
    options: RunOptions,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(policing, "utc_now", _clock(AHEAD))
    plan = start_plan(
        sqlite_store,
        demo_action(demo, max_wall_clock_seconds=60),
        profile_override="ci",
        options=options,
    )
    assert (plan.phase, plan.state) == (Phase.STRATEGIZE, PlanState.AWAITING_APPROVAL)
    [question] = pending(sqlite_store, plan)
    assert question.kind is ApprovalKind.BUDGET_PAUSE
    assert "the limit moves to 60 s after your answer" in question.question

    monkeypatch.setattr(approvals, "utc_now", _clock(AN_HOUR))  # answered an hour later
    answer_approval(sqlite_store, question.approval_id, approve=True, by="alice")
    monkeypatch.setattr(policing, "utc_now", _clock(AHEAD + AN_HOUR))
    plan = resume_plan(sqlite_store, plan.plan_id, options)

    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    assert pending(sqlite_store, plan) == []
    assert [e["limit"] for e in events(sqlite_store, plan)] == ["limits.max_wall_clock_seconds"]
