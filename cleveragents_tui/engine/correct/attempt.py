"""Recording a correction attempt as it goes: progress events, its end, the plan state it
leaves."""

from __future__ import annotations

from cleveragents_tui import failpoints
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import (
    CorrectionStatus,
    Phase,
    PlanState,
)
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store.store import Store


def record_progress(store: Store, plan_id: str, kind: str, payload: dict[str, object]) -> None:
    """A step of a running correction, as an event: the app's replay view and every other
    process watching the store show it as it happens."""
    with store.unit_of_work(write=True) as uow:
        uow.events.append(kind, payload, plan_id=plan_id)
        uow.commit()


def finish_attempt(
    store: Store,
    correction: CorrectionAttempt,
    status: CorrectionStatus,
    *,
    report: dict[str, object],
    replacement: str | None = None,
    appended: str | None = None,
    plan_state: PlanState | None = None,
    phase: Phase | None = None,
    errored: str | None = None,
    if_running: bool = False,
) -> bool:
    """``errored``: why the plan ended ``errored``, recorded as a run's failure is (a
    ``plan_errored`` event for the plan version this leaves), so `plan show` prints it.
    ``if_running``: nothing when the correction has ended already (False is returned), and
    ``report`` goes on top of what its report holds — read in the same transaction, where
    a read transaction of its own went first."""
    with store.unit_of_work(write=True) as uow:
        if if_running:
            now = uow.corrections.get(correction.correction_id)
            if now.status is not CorrectionStatus.RUNNING:
                return False
            report = {**now.report, **report}
        uow.corrections.finish(
            correction.correction_id,
            status,
            report=report,
            replacement=replacement,
            appended=appended,
        )
        if plan_state is not None or phase is not None:
            plan = uow.plans.get(correction.plan_id)
            changes: dict[str, object] = {"updated_at": utc_now()}
            if plan_state is not None:
                changes["state"] = plan_state
            if phase is not None:
                changes["phase"] = phase
            saved = uow.plans.save(plan.model_copy(update=changes))
            if errored is not None:
                uow.events.append(
                    "plan_errored",
                    {"reason": errored, "version": saved.version},
                    plan_id=correction.plan_id,
                )
        uow.events.append(
            "correction_finished",
            {"correction_id": correction.correction_id, "status": status.value},
            plan_id=correction.plan_id,
            actor=correction.requested_by,  # other tabs' status lines say who corrected
        )
        failpoints.hit("correction.finish", status.value)
        uow.commit()
    return True


def reload_attempt(store: Store, correction: CorrectionAttempt) -> CorrectionAttempt:
    with store.unit_of_work() as uow:
        return uow.corrections.get(correction.correction_id)


def load_plan(store: Store, plan_id: str) -> Plan:
    with store.unit_of_work() as uow:
        return uow.plans.get(plan_id)
