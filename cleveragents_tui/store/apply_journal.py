"""The apply journal's repository: the only code that reads and writes ``apply_journal``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cleveragents_tui.domain.apply_journal import ApplyStep, ApplyStepState
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.tables import ApplyJournalRow


def _step(row: ApplyJournalRow) -> ApplyStep:
    key = f"{row.plan_id}/{row.attempt}/{row.resource_id}"
    landed = mapping.load_json("apply_journal", key, "landed", row.landed) if row.landed else {}
    return ApplyStep(
        plan_id=row.plan_id,
        attempt=row.attempt,
        resource_id=row.resource_id,
        position=row.position,
        strategy=row.strategy,
        state=ApplyStepState(row.state),
        landed=landed,
    )


class ApplyJournalRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def plan(self, plan_id: str, attempt: int, resources: Sequence[tuple[str, str]]) -> None:
        """Add a ``planned`` entry for each (resource, strategy) the Apply has none for."""
        have = {step.resource_id for step in self.for_apply(plan_id, attempt)}
        for position, (resource_id, strategy) in enumerate(resources):
            if resource_id in have:
                continue
            self._session.add(
                ApplyJournalRow(
                    plan_id=plan_id,
                    attempt=attempt,
                    resource_id=resource_id,
                    position=position,
                    strategy=strategy,
                    state=ApplyStepState.PLANNED.value,
                    landed=None,
                    updated_at=utc_now(),
                )
            )

    def mark(
        self,
        plan_id: str,
        attempt: int,
        resource_id: str,
        state: ApplyStepState,
        landed: dict[str, Any] | None = None,
    ) -> None:
        row = self._session.get(ApplyJournalRow, (plan_id, attempt, resource_id))
        if row is None:
            raise LookupError(f"no apply journal entry for {resource_id} of {plan_id}")
        row.state = state.value
        if landed is not None:
            row.landed = mapping.dump_json(landed)
        row.updated_at = utc_now()

    def for_apply(self, plan_id: str, attempt: int) -> list[ApplyStep]:
        rows = self._session.scalars(
            select(ApplyJournalRow)
            .where(ApplyJournalRow.plan_id == plan_id, ApplyJournalRow.attempt == attempt)
            .order_by(ApplyJournalRow.position)
        )
        return [_step(row) for row in rows]

    def unfinished(self) -> list[ApplyStep]:
        """Every entry not ``landed``, of any plan and attempt, in plan and position order."""
        rows = self._session.scalars(
            select(ApplyJournalRow)
            .where(ApplyJournalRow.state != ApplyStepState.LANDED.value)
            .order_by(ApplyJournalRow.plan_id, ApplyJournalRow.attempt, ApplyJournalRow.position)
        )
        return [_step(row) for row in rows]
