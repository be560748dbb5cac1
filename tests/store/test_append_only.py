"""Superseding never deletes or edits: the store refuses, on both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, text, update
from sqlalchemy.exc import DBAPIError

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.errors import ImmutableRecordError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import DecisionRow


def _tree(store: Store) -> tuple[Decision, Decision, Decision]:
    plan = Plan(action="local/append-only")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase="strategize",
        question="q",
        chosen_option="root",
    )
    old = Decision(
        plan_id=plan.plan_id,
        parent_decision_id=root.decision_id,
        sequence_number=1,
        decision_type="strategy_choice",
        phase="strategize",
        question="how?",
        chosen_option="sync",
    )
    new = Decision(
        plan_id=plan.plan_id,
        parent_decision_id=root.decision_id,
        sequence_number=2,
        decision_type="user_intervention",
        phase="strategize",
        question="guidance",
        chosen_option="use async",
        is_correction=True,
        corrects_decision_id=old.decision_id,
    )
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add_many([root, old, new])
        uow.commit()
    return root, old, new


def test_supersede_sets_superseded_by_once_and_keeps_the_row(store: Store) -> None:
    root, old, new = _tree(store)
    with store.unit_of_work(write=True) as uow:
        uow.decisions.supersede([old.decision_id], by=new.decision_id)
        uow.commit()
    with store.unit_of_work() as uow:
        stored = uow.decisions.get(old.decision_id)
        assert stored == old.model_copy(update={"superseded_by": new.decision_id})
        current = uow.decisions.tree_rows(root.plan_id, include_superseded=False)
        assert [r.decision_id for r in current] == [root.decision_id, new.decision_id]
        assert len(uow.decisions.for_plan(root.plan_id)) == 3


def test_superseding_twice_is_refused(store: Store) -> None:
    _, old, new = _tree(store)
    with store.unit_of_work(write=True) as uow:
        uow.decisions.supersede([old.decision_id], by=new.decision_id)
        uow.commit()
    with (
        store.unit_of_work(write=True) as uow,
        pytest.raises(ImmutableRecordError, match="already superseded"),
    ):
        uow.decisions.supersede([old.decision_id], by=new.decision_id)


def test_deleting_a_decision_is_refused_by_the_database(store: Store) -> None:
    _, old, _ = _tree(store)
    with (
        store.unit_of_work(write=True) as uow,
        pytest.raises(ImmutableRecordError, match="never deleted"),
    ):
        uow._session.execute(delete(DecisionRow).where(DecisionRow.decision_id == old.decision_id))
        uow.commit()
    with store.unit_of_work() as uow:
        assert uow.decisions.get(old.decision_id) == old


def test_an_orm_delete_is_refused_too(store: Store) -> None:
    _, old, _ = _tree(store)
    with store.unit_of_work(write=True) as uow, pytest.raises(ImmutableRecordError):
        row = uow._session.get(DecisionRow, old.decision_id)
        uow._session.delete(row)
        uow.commit()
    with store.unit_of_work() as uow:
        assert uow.decisions.get(old.decision_id) == old


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("question", "rewritten"),
        ("chosen_option", "async"),
        ("confidence_score", 0.1),
        ("is_correction", True),
        ("step_key", "rewritten"),
    ],
)
def test_editing_any_other_column_is_refused(store: Store, column: str, value: object) -> None:
    _, old, _ = _tree(store)
    with pytest.raises((ImmutableRecordError, DBAPIError)), store.unit_of_work(write=True) as uow:
        uow._session.execute(
            update(DecisionRow)
            .where(DecisionRow.decision_id == old.decision_id)
            .values({column: value})
        )
        uow.commit()
    with store.unit_of_work() as uow:
        assert uow.decisions.get(old.decision_id) == old


def test_setting_superseded_by_together_with_another_column_is_refused(store: Store) -> None:
    _, old, new = _tree(store)
    with (
        store.unit_of_work(write=True) as uow,
        pytest.raises(ImmutableRecordError, match="only superseded_by"),
    ):
        uow._session.execute(
            update(DecisionRow)
            .where(DecisionRow.decision_id == old.decision_id)
            .values(superseded_by=new.decision_id, chosen_option="async")
        )
        uow.commit()


def test_changing_superseded_by_after_it_is_set_is_refused(store: Store) -> None:
    root, old, new = _tree(store)
    with store.unit_of_work(write=True) as uow:
        uow.decisions.supersede([old.decision_id], by=new.decision_id)
        uow.commit()
    with store.unit_of_work(write=True) as uow, pytest.raises(ImmutableRecordError, match="once"):
        uow._session.execute(
            update(DecisionRow)
            .where(DecisionRow.decision_id == old.decision_id)
            .values(superseded_by=root.decision_id)
        )
        uow.commit()
    with store.unit_of_work(write=True) as uow, pytest.raises(ImmutableRecordError, match="once"):
        uow._session.execute(
            update(DecisionRow)
            .where(DecisionRow.decision_id == old.decision_id)
            .values(superseded_by=None)
        )
        uow.commit()


@pytest.mark.postgres
def test_truncate_is_refused_on_postgresql(postgres_url: str) -> None:
    store = Store.open(postgres_url)
    try:
        _tree(store)
        with store.unit_of_work(write=True) as uow, pytest.raises(ImmutableRecordError):
            uow._session.execute(text("TRUNCATE decisions CASCADE"))
            uow.commit()
    finally:
        store.close()
