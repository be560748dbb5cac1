"""``safety.max_total_cost`` is checked before every step and tool call of a running plan
against every plan's model calls. The database sums their costs (the ``cost_usd`` column of
migration 0013, from its index), so a check reads one number however many calls the store
holds (issue 22: before, every call of every plan was read and its JSON parsed in Python,
0.1 s a check at 10,000 calls)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from cleveragents_tui.engine.run.errors import WaitForApproval
from cleveragents_tui.engine.run.policing import Policing
from cleveragents_tui.engine.run.runner import PlanRunner
from cleveragents_tui.store import mapping
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.usage_queries import MODEL_USAGE
from tests.support.scale_plan import ScalePlan, build


def _calls(store: Store, plan_id: str, *costs: object) -> None:
    """Model calls recorded as Policing records them; a cost of 0 is an unpriced call's."""
    with store.unit_of_work(write=True) as uow:
        for cost in costs:
            payload = {"model": "m", "tokens": 10, "cost_usd": cost, "priced": cost != 0}
            uow.events.append(MODEL_USAGE, payload, plan_id=plan_id)
        uow.commit()


def _policed(scale: ScalePlan, cap: float) -> Policing:
    police = PlanRunner(scale.store, scale.plan_id, scale.options).police
    safety = police.profile.safety.model_copy(update={"max_total_cost": cap})
    return dataclasses.replace(police, profile=police.profile.model_copy(update={"safety": safety}))


def _limit_events(store: Store, plan_id: str) -> list[dict[str, object]]:
    with store.unit_of_work() as uow:
        return uow.events.payloads(plan_id, "limit_exceeded")


def test_other_plans_calls_pass_the_total_cap_and_the_plan_stops(
    db_url: str, tmp_path: Path
) -> None:
    """Under the cap the plan goes on; another plan's calls take the total past it and the
    next check pauses this plan. Unpriced calls and costs that are not numbers count $0."""
    mine = build(tmp_path / "mine", 5, db_url)
    other = build(tmp_path / "other", 5, db_url)
    try:
        police = _policed(mine, cap=0.01)
        _calls(other.store, other.plan_id, 0.004, 0.004, 0, "n/a")
        _calls(mine.store, mine.plan_id, 0.001)
        police.check()  # $0.009 of $0.01: goes on
        assert police.usage().total_cost_usd == pytest.approx(0.009)
        _calls(other.store, other.plan_id, 0.0015)
        with pytest.raises(WaitForApproval) as paused:
            police.check()
        [limit] = _limit_events(mine.store, mine.plan_id)
    finally:
        mine.store.close()
        other.store.close()
    assert paused.value.approval.details["limit"] == "safety.max_total_cost"
    assert limit["limit"] == "safety.max_total_cost"
    assert limit["used"] == pytest.approx(0.0105)


def test_a_check_reads_one_sum_not_every_call(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many calls other plans recorded, a check parses none of them and sends the
    same statements; the total is one aggregate over the costs' column."""
    mine = build(tmp_path / "mine", 5, db_url)
    other = build(tmp_path / "other", 5, db_url)
    parsed: list[object] = []
    sent: list[str] = []
    load_json = mapping.load_json

    def counted(*args: Any) -> object:
        parsed.append(args)
        return load_json(*args)

    def note(*args: Any) -> None:
        sent.append(args[2])

    try:
        police = _policed(mine, cap=1000.0)
        police.usage()  # the plan's tally and start time read once
        monkeypatch.setattr(mapping, "load_json", counted)
        event.listen(mine.store.engine, "before_cursor_execute", note)
        statements = []
        totals = []
        for count in (10, 300):
            _calls(other.store, other.plan_id, *[0.5] * count)
            sent.clear()
            totals.append(police.usage().total_cost_usd)
            statements.append(list(sent))
        event.remove(mine.store.engine, "before_cursor_execute", note)
    finally:
        mine.store.close()
        other.store.close()
    assert totals == [pytest.approx(5.0), pytest.approx(155.0)]
    assert parsed == []  # no call's payload read, the plan's own included (none new)
    assert statements[0] == statements[1]
    [total] = [s for s in statements[1] if "sum(" in s.lower()]
    assert "events.cost_usd" in total and "payload" not in total, total
