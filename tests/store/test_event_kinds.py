"""A plan's events of one kind are read by a statement SQLite plans once (issue 22).

Events' partial index ``ix_events_model_cost`` (WHERE kind = 'model_usage') made SQLite plan
a statement comparing ``kind`` with a bound value anew at every execution, to see whether
that index applies; written as a literal, the statement is planned when first prepared and
reused. SQLite's authorizer is called while a statement is planned: a statement prepared
once and run again calls it no more.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork
from cleveragents_tui.store.usage_queries import MODEL_USAGE, kind_is

PLAN = "01J0000000000000000000PLAN"


def _planned(store: Store, read: Callable[[UnitOfWork], object]) -> tuple[object, int]:
    """``read``'s result on its second run, and how often SQLite planned a statement then.
    The authorizer is set once (setting it expires every prepared statement)."""
    planned = [0]

    def authorize(*_: Any) -> int:
        planned[0] += 1
        return 0  # SQLITE_OK

    def set_authorizer(session: Session) -> None:
        dbapi = session.connection().connection.dbapi_connection
        assert dbapi is not None  # a connection checked out of the pool holds its driver's
        dbapi.set_authorizer(authorize)

    with store.unit_of_work() as uow:
        uow.run(set_authorizer)
        read(uow)  # prepared (and planned) once
        planned[0] = 0
        found = read(uow)
        count = planned[0]  # before the transaction's end, which SQLite prepares each time
    return found, count


@pytest.fixture
def store(tmp_path: Path) -> Any:
    store = Store.open(str(tmp_path / "agents.db"))
    with store.unit_of_work(write=True) as uow:
        uow.events.append("plan_errored", {"reason": "first"}, plan_id=None)
        uow.events.append(MODEL_USAGE, {"model": "m", "cost_usd": 0.5})
        uow.events.append("plan_errored", {"reason": "second"})
        uow.commit()
    yield store
    store.close()


def test_a_plans_events_of_one_kind_are_planned_once(store: Store) -> None:
    found, planned = _planned(store, lambda uow: uow.events.payloads(PLAN, "plan_errored"))
    assert found == []  # none of this plan's: the statement runs, and plans nothing
    assert planned == 0


def test_a_plans_model_calls_and_start_are_planned_once(store: Store) -> None:
    calls, planned = _planned(store, lambda uow: uow.usage.model_calls_after(PLAN, 0))
    assert calls == ([], 0)
    assert planned == 0
    started, planned = _planned(store, lambda uow: uow.usage.started_running(PLAN))
    assert started is None
    assert planned == 0


def test_a_kind_that_is_not_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="not an event kind"):
        kind_is("x' OR '1'='1")
