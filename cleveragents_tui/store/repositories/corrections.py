"""Correction attempts: how each ran and ended, and what its diff compares."""

from __future__ import annotations

from sqlalchemy import bindparam, insert, select, update

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import CorrectionStatus
from cleveragents_tui.domain.errors import ConcurrentChangeError, NotFoundError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.driver_reads import fetch
from cleveragents_tui.store.repositories.base import Repository, resolve_id
from cleveragents_tui.store.session_writes import write
from cleveragents_tui.store.tables import CorrectionAttemptRow

_LIST_CORRECTIONS = "see a plan's corrections with `agents plan show PLAN`"
# The reads a correction's execute makes several times, built once and run on the driver's
# cursor (store/driver_reads.py: through the ORM each cost more than its SQL, issue 22).
# They select rows, as the ORM's selects did: with autoflush off, neither sees unflushed
# changes; only get() read the session's identity map, and no caller changes a correction
# in the transaction that gets it.
_c = CorrectionAttemptRow
_ONE = select(_c.__table__).where(_c.correction_id == bindparam("id"))
_REPORT = select(_c.report).where(_c.correction_id == bindparam("id"))
_OF_PLAN = select(_c.__table__).where(_c.plan_id == bindparam("plan")).order_by(_c.created_at)
_INSERT = insert(_c)
# its writes likewise (store/session_writes.py): the ORM's UPDATE cost ~1 ms each
_FINISH = (
    update(_c)
    .where(_c.correction_id == bindparam("id"), _c.status == CorrectionStatus.RUNNING.value)
    .values(
        status=bindparam("status"),
        report=bindparam("report"),
        replacement_decision_id=bindparam("replacement"),
        appended_plan_id=bindparam("appended"),
        finished_at=bindparam("finished_at"),
    )
)
_KEEP_REPORT = (
    update(_c).where(_c.correction_id == bindparam("id")).values(report=bindparam("report"))
)
_RUNNING = select(_c.__table__).where(
    _c.plan_id == bindparam("plan"), _c.status == CorrectionStatus.RUNNING.value
)


class CorrectionRepository(Repository):
    def add(self, correction: CorrectionAttempt) -> None:
        """A Core insert on the driver's cursor, after the rows added before it (its plan)."""
        if self._session.new:
            self._session.flush()
        data = correction.model_dump(mode="python")
        write(self._session, _INSERT, {**data, "report": mapping.dump_json(data["report"])})

    def resolve(self, ref: str) -> str:
        return resolve_id(
            self._session,
            CorrectionAttemptRow.correction_id,
            ref,
            "correction",
            _LIST_CORRECTIONS,
        )

    def get(self, correction_id: str) -> CorrectionAttempt:
        rows = fetch(self._session, _ONE, id=correction_id)
        if not rows:
            raise NotFoundError(f"correction {correction_id} does not exist", _LIST_CORRECTIONS)
        return mapping.correction_from_row(rows[0])

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
        kept = next((row.report for row in fetch(self._session, _REPORT, id=correction_id)), None)
        loaded = mapping.load_json("correction_attempts", correction_id, "report", kept)
        if isinstance(loaded, dict) and "snapshots" in loaded and "snapshots" not in report:
            report = {**report, "snapshots": loaded["snapshots"]}
        finished = write(
            self._session,
            _FINISH,
            {
                "id": correction_id,
                "status": status.value,
                "report": mapping.dump_json(report),
                "replacement": replacement,
                "appended": appended,
                "finished_at": utc_now(),
            },
        )
        if finished != 1:
            raise ConcurrentChangeError(f"correction {correction_id} already ended")

    def record_snapshots(self, correction_id: str, snapshots: dict[str, object]) -> bool:
        """Keep what a correction's diff compares in its report (``snapshots``), merged into
        what is kept there. Recorded again each time its replay stops, until the replay has
        ended (``"replay": "ended"``, or snapshots without ``replay``, recorded once by an
        older version): from then on they never change. False when they were final."""
        rows = fetch(self._session, _REPORT, id=correction_id)
        if not rows:
            raise NotFoundError(f"correction {correction_id} does not exist", _LIST_CORRECTIONS)
        report = mapping.load_json("correction_attempts", correction_id, "report", rows[0].report)
        report = report if isinstance(report, dict) else {}
        kept = report.get("snapshots")
        kept = kept if isinstance(kept, dict) else {}
        if kept and kept.get("replay", "ended") == "ended":
            return False
        merged = mapping.dump_json({**report, "snapshots": {**kept, **snapshots}})
        write(self._session, _KEEP_REPORT, {"id": correction_id, "report": merged})
        return True

    def for_plan(self, plan_id: str) -> list[CorrectionAttempt]:
        return [
            mapping.correction_from_row(r) for r in fetch(self._session, _OF_PLAN, plan=plan_id)
        ]

    def latest_id(self, plan_id: str) -> str | None:
        """The id of the plan's latest correction, without reading the reports (a diff's
        snapshots can hold megabytes of file text)."""
        query = (
            select(_c.correction_id)
            .where(_c.plan_id == plan_id)
            .order_by(_c.created_at.desc(), _c.correction_id.desc())
            .limit(1)
        )
        return self._session.scalar(query)

    def running(self, plan_id: str) -> CorrectionAttempt | None:
        """The plan's correction still running, if any (there is at most one)."""
        rows = fetch(self._session, _RUNNING, plan=plan_id)
        return mapping.correction_from_row(rows[0]) if rows else None
