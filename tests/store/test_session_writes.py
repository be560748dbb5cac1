"""Writes sent on the driver's cursor of a unit of work (store/session_writes.py) are refused
as the ORM's are: the append-only triggers' refusal and a plan held elsewhere raise the
store's errors, and nothing of the transaction is kept; the engine's listeners hear them."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, create_engine, text, update

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import ConcurrentChangeError, ImmutableRecordError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store.session_writes import write
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import DecisionRow
from tests.support.statements import sent_statements

REWRITE = (
    update(DecisionRow)
    .where(DecisionRow.decision_id == bindparam("id"))
    .values(question=bindparam("question"))
)


def _plan_with_a_decision(store: Store) -> tuple[Plan, Decision]:
    plan = Plan(action="local/session-writes")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase="strategize",
        question="q",
        chosen_option="root",
    )
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.decisions.add(root)  # the plan, added before, is written first
        uow.commit()
    return plan, root


def test_a_write_the_triggers_refuse_is_the_stores_refusal_and_nothing_is_kept(
    store: Store,
) -> None:
    plan, root = _plan_with_a_decision(store)
    with store.unit_of_work(write=True) as uow:
        saved = uow.plans.save(plan.model_copy(update={"title": "kept?", "updated_at": utc_now()}))
        with pytest.raises(ImmutableRecordError, match="append-only"):
            uow.run(write, REWRITE, {"id": root.decision_id, "question": "rewritten"})
    with store.unit_of_work() as uow:
        assert uow.decisions.get(root.decision_id) == root
        assert uow.plans.get(plan.plan_id).version == plan.version  # the save went too
    assert saved.version == plan.version + 1


def test_the_writes_are_heard_in_the_order_made(store: Store) -> None:
    plan, _ = _plan_with_a_decision(store)
    with sent_statements(store.engine) as sent, store.unit_of_work(write=True) as uow:
        uow.events.append("one", {}, plan_id=plan.plan_id)
        uow.plans.save(plan.model_copy(update={"updated_at": utc_now()}))
        uow.events.append("two", {}, plan_id=plan.plan_id)
        uow.commit()
    writes = [s.split()[0:3] for s in sent if not s.startswith(("BEGIN", "SELECT"))]
    assert writes == [
        ["INSERT", "INTO", "events"],
        ["UPDATE", "plans", "SET"],
        ["INSERT", "INTO", "events"],
    ]
    with store.unit_of_work() as uow:
        assert uow.plans.get(plan.plan_id).version == plan.version + 1
        assert uow.events.payloads(plan.plan_id, "two") == [{}]


def test_a_save_is_seen_by_the_next_read_of_the_same_transaction(store: Store) -> None:
    plan, _ = _plan_with_a_decision(store)
    with store.unit_of_work(write=True) as uow:
        held = uow.plans.lock(plan.plan_id)
        uow.plans.save(held.model_copy(update={"title": "renamed", "updated_at": utc_now()}))
        again = uow.plans.get(plan.plan_id)
        assert (again.title, again.version) == ("renamed", plan.version + 1)


@pytest.mark.postgres
def test_a_plan_locked_elsewhere_is_busy_at_once(postgres_url: str) -> None:
    store = Store.open(postgres_url)
    other = create_engine(postgres_url)
    try:
        plan, _ = _plan_with_a_decision(store)
        with other.connect() as held:
            held.execute(
                text("SELECT plan_id FROM plans WHERE plan_id = :p FOR UPDATE"), {"p": plan.plan_id}
            )
            with (
                pytest.raises(ConcurrentChangeError, match="another process"),
                store.unit_of_work(write=True) as uow,
            ):
                uow.plans.lock(plan.plan_id)
            held.rollback()
        with store.unit_of_work(write=True) as uow:  # free again, and the store usable
            assert uow.plans.lock(plan.plan_id).plan_id == plan.plan_id
    finally:
        other.dispose()
        store.close()
