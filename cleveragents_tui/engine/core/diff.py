"""Showing what a correction changed, in decisions and in every resource: read from the store
only, never a sandbox, so later corrections, runs, pruning or Apply cannot change it
(docs/corrections.md, "Diffs"; recorded by core/replay_snapshots.py)."""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    CorrectionStatus,
)
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.core.file_diff import ResourceDiff, loaded
from cleveragents_tui.engine.core.replay_snapshots import (
    STOPPED,
    UNFINISHED,
    latest_replay,
    snapshots_of,
)
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class CorrectionDiff:
    """``at_decision`` is None when there is no such comparison (a Strategize decision, or
    no snapshots); ``note`` says why nothing is compared, when nothing is."""

    correction: CorrectionAttempt
    superseded: list[TreeRow]
    replacements: list[TreeRow]
    final: list[ResourceDiff]
    at_decision: list[ResourceDiff] | None = None
    note: str | None = None
    # set while the replay has not ended: the new attempt's side is where it last stopped
    unfinished: str | None = None


def latest_correction(store: Store, plan_ref: str) -> str:
    """The id of the plan's latest correction, the one ``agents plan diff PLAN`` shows."""
    with store.unit_of_work() as uow:
        plan_id = uow.plans.resolve(plan_ref)
        latest = uow.corrections.latest_id(plan_id)
    if latest is None:
        raise NotFoundError(
            f"plan {plan_id} has no correction to compare",
            "correct one of its decisions first: agents plan correct DECISION --mode=revert "
            '--guidance "..."',
        )
    return latest


def correction_diff(store: Store, correction_ref: str) -> CorrectionDiff:
    """The diff recorded for a correction: the same every time it is asked for once its
    replay has ended (until then, where the replay last stopped: ``unfinished`` says so)."""
    with store.unit_of_work() as uow:
        correction_id = uow.corrections.resolve(correction_ref)
        correction = uow.corrections.get(correction_id)
        rows = uow.decisions.tree_rows(correction.plan_id, include_superseded=True)
        latest = latest_replay(uow, correction.plan_id)
        plan = uow.plans.get(correction.plan_id)
    snapshots = snapshots_of(correction)
    if "final" in snapshots:  # recorded when its replay stopped (else: only its basis)
        by_id = {r.decision_id: r for r in rows}
        at_decision = snapshots.get("at_decision")
        going_on = (
            snapshots.get("replay") == STOPPED
            and latest is not None
            and latest.correction_id == correction_id
            and not plan.state.is_terminal
        )
        return CorrectionDiff(
            correction,
            [by_id[i] for i in snapshots.get("superseded", []) if i in by_id],
            [by_id[i] for i in snapshots.get("replacements", []) if i in by_id],
            loaded(snapshots.get("final")),
            loaded(at_decision) if isinstance(at_decision, list) else None,
            unfinished=UNFINISHED.format(plan=plan.plan_id) if going_on else None,
        )
    replacement = correction.replacement_decision_id
    return CorrectionDiff(
        correction,
        [r for r in rows if replacement is not None and r.superseded_by == replacement],
        [r for r in rows if r.corrects_decision_id == correction.target_decision_id],
        [],
        note=_why_nothing(correction),
    )


def _why_nothing(correction: CorrectionAttempt) -> str:
    if correction.mode is CorrectionMode.APPEND:
        plan = correction.appended_plan_id or "-"
        return f"an append changes no history: its work is in the appended plan {plan}"
    if correction.status is CorrectionStatus.RUNNING:
        return "the correction is running: its snapshots are recorded when the replay stops"
    if correction.status is not CorrectionStatus.SUCCEEDED:
        return f"the correction {correction.status.value}: nothing was rolled back"
    return (
        "no snapshots were recorded for this correction (made by an older version, or its "
        "process ended before the replay stopped)"
    )
