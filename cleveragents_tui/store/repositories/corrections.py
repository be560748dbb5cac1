"""Correction attempts: how each ran and ended, and what its diff compares."""

from __future__ import annotations

from sqlalchemy import select, update

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import CorrectionStatus
from cleveragents_tui.domain.errors import ConcurrentChangeError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.repositories.base import Repository, resolve_id
from cleveragents_tui.store.tables import CorrectionAttemptRow

_LIST_CORRECTIONS = "see a plan's corrections with `agents plan show PLAN`"


class CorrectionRepository(Repository):
    def add(self, correction: CorrectionAttempt) -> None:
        self._session.add(mapping.correction_to_row(correction))

    def resolve(self, ref: str) -> str:
        return resolve_id(
            self._session,
            CorrectionAttemptRow.correction_id,
            ref,
            "correction",
            _LIST_CORRECTIONS,
        )

    def get(self, correction_id: str) -> CorrectionAttempt:
        row = self._get(CorrectionAttemptRow, correction_id, "correction", _LIST_CORRECTIONS)
        return mapping.correction_from_row(row)

    def finish(
        self,
        correction_id: str,
        status: CorrectionStatus,
        *,
        report: dict[str, object],
        replacement: str | None = None,
        appended: str | None = None,
    ) -> None:
        """Record how a running correction ended (once). Snapshots recorded for its diff
        while it ran (``record_snapshots``) stay in the report."""
        kept = self._session.scalar(
            select(CorrectionAttemptRow.report).where(
                CorrectionAttemptRow.correction_id == correction_id
            )
        )
        loaded = mapping.load_json("correction_attempts", correction_id, "report", kept)
        if isinstance(loaded, dict) and "snapshots" in loaded and "snapshots" not in report:
            report = {**report, "snapshots": loaded["snapshots"]}
        result = self._session.execute(
            update(CorrectionAttemptRow)
            .where(
                CorrectionAttemptRow.correction_id == correction_id,
                CorrectionAttemptRow.status == CorrectionStatus.RUNNING.value,
            )
            .values(
                status=status.value,
                report=mapping.dump_json(report),
                replacement_decision_id=replacement,
                appended_plan_id=appended,
                finished_at=utc_now(),
            )
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise ConcurrentChangeError(f"correction {correction_id} already ended")

    def record_snapshots(self, correction_id: str, snapshots: dict[str, object]) -> bool:
        """Keep what a correction's diff compares in its report (``snapshots``), merged into
        what is kept there. Recorded again each time its replay stops, until the replay has
        ended (``"replay": "ended"``, or snapshots without ``replay``, recorded once by an
        older version): from then on they never change. False when they were final."""
        row = self._get(CorrectionAttemptRow, correction_id, "correction", _LIST_CORRECTIONS)
        report = mapping.load_json("correction_attempts", correction_id, "report", row.report)
        report = report if isinstance(report, dict) else {}
        kept = report.get("snapshots")
        kept = kept if isinstance(kept, dict) else {}
        if kept and kept.get("replay", "ended") == "ended":
            return False
        row.report = mapping.dump_json({**report, "snapshots": {**kept, **snapshots}})
        return True

    def for_plan(self, plan_id: str) -> list[CorrectionAttempt]:
        return self._list(
            select(CorrectionAttemptRow)
            .where(CorrectionAttemptRow.plan_id == plan_id)
            .order_by(CorrectionAttemptRow.created_at),
            mapping.correction_from_row,
        )

    def running(self, plan_id: str) -> CorrectionAttempt | None:
        """The plan's correction still running, if any (there is at most one)."""
        row = self._session.scalars(
            select(CorrectionAttemptRow).where(
                CorrectionAttemptRow.plan_id == plan_id,
                CorrectionAttemptRow.status == CorrectionStatus.RUNNING.value,
            )
        ).first()
        return None if row is None else mapping.correction_from_row(row)
