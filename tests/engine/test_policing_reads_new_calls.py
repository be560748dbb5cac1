"""A running plan's limits are checked before every step against its model calls: each check
reads only the calls recorded since the last one (issue 22: reading all of them made a step
of a plan with 10,000 calls cost 0.2 s), and adds up to what all of them say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.engine.run.runner import PlanRunner
from cleveragents_tui.store import mapping
from cleveragents_tui.store.usage_queries import MODEL_USAGE
from tests.support.scale_plan import build


def _calls(scale_store: object, plan_id: str, *tokens: int, model: str = "m") -> None:
    with scale_store.unit_of_work(write=True) as uow:  # type: ignore[attr-defined]
        for n in tokens:
            payload = {"model": model, "tokens": n, "cost_usd": n / 1000, "priced": model == "m"}
            uow.events.append(MODEL_USAGE, payload, plan_id=plan_id)
        uow.commit()


def test_each_check_reads_only_the_model_calls_recorded_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scale = build(tmp_path, 5)
    read: list[object] = []
    load_json = mapping.load_json  # what usage_queries calls, as mapping.load_json

    def counted(table: str, key: str, column: str, raw: str | None) -> Any:
        read.append(raw)
        return load_json(table, key, column, raw)

    try:
        police = PlanRunner(scale.store, scale.plan_id, scale.options).police
        monkeypatch.setattr(mapping, "load_json", counted)
        _calls(scale.store, scale.plan_id, *range(1, 41))
        first = police.usage()
        assert len(read) == 40
        _calls(scale.store, scale.plan_id, 100, 7, model="unpriced")
        read.clear()
        second = police.usage()
        assert len(read) == 2  # the two new calls, not the 42
        third = police.usage()
        assert len(read) == 2  # nothing new: nothing read
        assert (third.plan.tokens, third.unpriced) == (second.plan.tokens, second.unpriced)
    finally:
        scale.store.close()
    assert (first.plan.tokens, first.largest_call_tokens) == (820, 40)
    assert second.plan.tokens == 820 + 107
    assert second.plan.cost_usd == pytest.approx(0.927)
    assert second.largest_call_tokens == 100
    assert second.unpriced == {"unpriced": 2}
