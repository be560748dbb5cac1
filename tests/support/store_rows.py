"""Rows the engine never writes on its own, put straight into a store for a test."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store import mapping
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import CheckpointGroupRow


def add_groups(store: Store, *groups: CheckpointGroup) -> None:
    """Insert checkpoint groups as they are, committed or not (the recorder only ever opens
    pending ones and commits them with their decision)."""
    with Session(store.engine) as session:
        session.add_all(CheckpointGroupRow(**group.model_dump(mode="python")) for group in groups)
        session.commit()


def add_plan(store: Store, plan: Plan, decisions: list[Decision]) -> tuple[Plan, list[Decision]]:
    """Insert ``plan`` and its ``decisions`` (parents before children) in one transaction;
    returns them, as the tests' plan builders do."""
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add_many(decisions)
        uow.commit()
    return plan, decisions


def plan_groups(store: Store, plan_id: str) -> list[CheckpointGroup]:
    """Every checkpoint group of the plan, oldest first (the engine reads one decision's)."""
    with Session(store.engine) as session:
        rows = session.scalars(
            select(CheckpointGroupRow)
            .where(CheckpointGroupRow.plan_id == plan_id)
            .order_by(CheckpointGroupRow.created_at)
        )
        return [mapping.group_from_row(row) for row in rows]
