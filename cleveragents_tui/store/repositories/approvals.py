"""Approvals asked of people, and their answers (each given once)."""

from __future__ import annotations

from sqlalchemy import ColumnElement, select, update

from cleveragents_tui.domain.approval import Approval, ApprovalAnswer
from cleveragents_tui.domain.errors import ConcurrentChangeError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.repositories.base import Repository, resolve_id
from cleveragents_tui.store.tables import ApprovalRow

_LIST_APPROVALS = "list them with `agents approval list --all`"


class ApprovalRepository(Repository):
    def add(self, approval: Approval) -> None:
        self._session.add(mapping.approval_to_row(approval))

    def resolve(self, ref: str) -> str:
        return resolve_id(self._session, ApprovalRow.approval_id, ref, "approval", _LIST_APPROVALS)

    def get(self, approval_id: str) -> Approval:
        row = self._get(ApprovalRow, approval_id, "approval", _LIST_APPROVALS)
        return mapping.approval_from_row(row)

    def every(self, plan_id: str | None = None) -> list[Approval]:
        """Every approval, answered or not (of one plan when given), oldest first."""
        return self._oldest_first(plan_id)

    def pending(self, plan_id: str | None = None) -> list[Approval]:
        """The approvals still waiting for an answer (of one plan when given), oldest first."""
        return self._oldest_first(plan_id, ApprovalRow.answer.is_(None))

    def _oldest_first(self, plan_id: str | None, *where: ColumnElement[bool]) -> list[Approval]:
        if plan_id is not None:
            where = (*where, ApprovalRow.plan_id == plan_id)
        return self._list(
            select(ApprovalRow)
            .where(*where)
            .order_by(ApprovalRow.requested_at, ApprovalRow.approval_id),
            mapping.approval_from_row,
        )

    def answer(self, approval_id: str, answer: ApprovalAnswer, by: str, reason: str | None) -> None:
        """Record the answer once; a second answer is refused."""
        result = self._session.execute(
            update(ApprovalRow)
            .where(ApprovalRow.approval_id == approval_id, ApprovalRow.answer.is_(None))
            .values(answer=answer.value, answered_by=by, reason=reason, answered_at=utc_now())
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            self.get(approval_id)  # raises NotFoundError for an unknown id
            raise ConcurrentChangeError(
                f"approval {approval_id} was already answered",
                "see its answer with `agents approval list --all`",
            )

    def pending_counts(self) -> dict[str, int]:
        return self._count_by(ApprovalRow.plan_id, ApprovalRow.answer.is_(None))
