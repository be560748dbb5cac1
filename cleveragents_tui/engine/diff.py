"""Comparing attempts: what a correction changed, in decisions and in every resource.

A revert's diff compares fixed snapshots recorded for it (docs/corrections.md, "Diffs"):

* **at the corrected decision**: the state right after the corrected decision's own work in
  the old attempt (the checkpoint of the next decision the old attempt recorded, or its
  final state when none followed) against the same point in the new attempt (the checkpoint
  of the next decision recorded after the decision that replaced it, or the new attempt's
  final state when none followed). Only for an Execute decision: a Strategize decision did
  no work of its own.
* **final states**: the old attempt's final state (the safety checkpoint the rollback takes)
  against the new attempt's final state (a checkpoint taken when the replay stops: at a
  gate, or done).

The old attempt's points are chosen before the rollback, while its checkpoints are all
alive; the new attempt's when the replay stops. The files (rows) that differ are read then
and kept in the correction's report — text, or a one-line summary for a binary or very
large file — with the decisions superseded and re-made. Showing a diff reads the store
only, never a sandbox: later corrections, runs, pruning or Apply cannot change it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CheckpointType,
    CorrectionMode,
    CorrectionStatus,
    DecisionType,
    Phase,
)
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.ids import parse_ulid
from cleveragents_tui.domain.rollback import ResourceOutcome, RollbackReport
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.sandboxes import PlanSandboxes
from cleveragents_tui.sandbox.base import Change, ChangeKind, Sandbox
from cleveragents_tui.store.store import Store

# A side larger than this is summarised, not kept: the report lives in the database.
TEXT_LIMIT = 1_000_000
# The text one correction keeps in all; past it, the other files are listed, not read.
TOTAL_LIMIT = 20_000_000
# What git calls binary: a NUL in the first 8000 bytes.
_BINARY_PROBE = 8000
# The two comparisons, as the CLI and the app title them.
AT_DECISION = (
    "at the corrected decision: the old attempt right after it vs the new attempt right "
    "after its replacement"
)
FINAL = (
    "final states: the old attempt when the correction started vs the new attempt when "
    "the replay stopped"
)
NO_AT_DECISION = (
    "the corrected decision is not an Execute decision: it did no work of its own, so only "
    "the final states are compared"
)
_RECREATED = (
    "its sandbox has no checkpoints and was made anew from the real resource: the old "
    "attempt's state was not kept"
)


@dataclass(frozen=True)
class FileDiff:
    """One changed file (or row): its text on each side (None where it is absent), or, for
    a binary or very large file, a summary instead of its contents."""

    change: Change
    old: str | None
    new: str | None
    summary: str | None = None


@dataclass(frozen=True)
class ResourceDiff:
    resource_id: str
    old_ref: str
    new_ref: str
    files: list[FileDiff] = field(default_factory=list)
    note: str | None = None


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


# -- recording (during the correction) ---------------------------------------------------


def old_attempt_points(
    store: Store, decision_id: str, targets: Mapping[str, CheckpointMetadata]
) -> dict[str, str] | None:
    """Before a revert rolls back: per resource, the checkpoint holding the old attempt's
    state right after the corrected decision's own work — the state the next decision was
    made in. Empty when no decision followed (the point is then the old attempt's final
    state); None for a decision that is not an Execute decision (there is no such point)."""
    with store.unit_of_work() as uow:
        decision = uow.decisions.get(decision_id)
        if decision.phase is not Phase.EXECUTE:
            return None
        decisions = uow.decisions.for_plan(decision.plan_id, include_superseded=False)
        rows = uow.checkpoints.for_plan(decision.plan_id)
    found = _state_after(decisions, rows, decision.sequence_number)
    if found is None:
        return {}
    return {r: found.get(r, target.ref) for r, target in targets.items()}


def record_snapshots(
    store: Store,
    correction_id: str,
    rollback: RollbackReport | None,
    old_points: Mapping[str, str] | None,
    sandbox_base: Path | None = None,
) -> None:
    """When a revert's replay stops: take the new attempt's final state of every resource
    ``rollback`` rolled back, read what differs from the old attempt (final states, and at
    the corrected decision when ``old_points`` is given), and keep it with the correction,
    once."""
    with store.unit_of_work() as uow:
        correction = uow.corrections.get(correction_id)
        if "snapshots" in correction.report:
            return
        decisions = uow.decisions.for_plan(correction.plan_id, include_superseded=True)
        rows = uow.checkpoints.for_plan(correction.plan_id)
    target = correction.target_decision_id
    made = sorted(
        (d for d in decisions if d.corrects_decision_id == target),
        key=lambda d: d.sequence_number,
    )
    made_ids = {d.decision_id for d in made}
    remade = next(
        (
            d
            for d in made
            if d.decision_type is not DecisionType.USER_INTERVENTION and d.superseded_by is None
        ),
        None,
    )
    new_state = (
        _state_after(decisions, rows, remade.sequence_number) if remade is not None else None
    )
    sandboxes = PlanSandboxes(store, correction.plan_id, sandbox_base)
    budget = _Budget(TOTAL_LIMIT)
    final: list[dict[str, Any]] = []
    at_decision: list[dict[str, Any]] = []
    for entry in rollback.resources if rollback is not None else ():
        if entry.outcome is ResourceOutcome.RECREATED:  # phase-level tier: nothing to compare
            final.append(_stored(ResourceDiff(entry.resource_id, "", "", note=_RECREATED)))
            continue
        if entry.outcome is not ResourceOutcome.ROLLED_BACK or entry.safety_ref is None:
            continue
        resource_id, safety = entry.resource_id, entry.safety_ref
        old_point = (old_points or {}).get(resource_id, safety)
        try:
            sandbox = sandboxes.get(resource_id)
            now = sandbox.checkpoint()
        except UserError as exc:
            note = f"the new attempt's state could not be recorded: {exc}"
            final.append(_stored(ResourceDiff(resource_id, safety, "", note=note)))
            at_decision.append(_stored(ResourceDiff(resource_id, old_point, "", note=note)))
            continue
        try:
            final.append(_stored(_compare(sandbox, resource_id, safety, now, budget)))
            # a resource the next decision has no checkpoint of was not written since the
            # rollback: it is still at the rollback's target
            new_point = (
                now if new_state is None else new_state.get(resource_id, entry.target_ref or now)
            )
            at_decision.append(
                _stored(_compare(sandbox, resource_id, old_point, new_point, budget))
            )
        finally:
            with contextlib.suppress(UserError):  # only read here: the diff keeps the contents
                sandbox.drop_checkpoint(now)
    snapshots: dict[str, object] = {
        "recorded_at": utc_now().isoformat(),
        # superseded by the guidance decision, or by a decision re-made in its place
        "superseded": [d.decision_id for d in decisions if d.superseded_by in made_ids],
        "replacements": [d.decision_id for d in made],
        "final": final,
        "at_decision": at_decision if old_points is not None else None,
    }
    with store.unit_of_work(write=True) as uow:
        uow.corrections.record_snapshots(correction_id, snapshots)
        uow.commit()


def _state_after(
    decisions: Iterable[Decision], rows: Iterable[CheckpointMetadata], after: int
) -> dict[str, str] | None:
    """The checkpoints of the first current Execute decision recorded after sequence number
    ``after``: the state it was made in, everything before it done (resource -> ref; a
    resource without one was not written since). None when no such decision was recorded."""
    following = [
        d
        for d in decisions
        if d.superseded_by is None
        and d.phase is Phase.EXECUTE
        and d.decision_type is not DecisionType.USER_INTERVENTION  # made in no state of its own
        and d.sequence_number > after
    ]
    if not following:
        return None
    first = min(following, key=lambda d: d.sequence_number)
    return {
        r.resource_id: r.ref
        for r in rows
        if r.decision_id == first.decision_id and r.checkpoint_type is CheckpointType.DECISION_POINT
    }


@dataclass
class _Budget:
    """The text a correction may still keep (bytes)."""

    left: int


def _compare(
    sandbox: Sandbox, resource_id: str, old_ref: str, new_ref: str, budget: _Budget
) -> ResourceDiff:
    try:
        files = [
            _file(sandbox, c, old_ref, new_ref, budget) for c in sandbox.diff(old_ref, new_ref)
        ]
    except UserError as exc:
        return ResourceDiff(resource_id, old_ref, new_ref, note=str(exc))
    return ResourceDiff(resource_id, old_ref, new_ref, files)


def _file(
    sandbox: Sandbox, change: Change, old_ref: str, new_ref: str, budget: _Budget
) -> FileDiff:
    if budget.left <= 0:
        kept = f"contents not kept: the diff already holds {TOTAL_LIMIT:,} bytes of text"
        return FileDiff(change, None, None, kept)
    old, new = sandbox.read(old_ref, change.path), sandbox.read(new_ref, change.path)
    if _binary(old) or _binary(new):
        return FileDiff(change, None, None, f"binary file: contents not shown ({_sizes(old, new)})")
    if len(old or b"") > TEXT_LIMIT or len(new or b"") > TEXT_LIMIT:
        return FileDiff(change, None, None, f"large file: contents not shown ({_sizes(old, new)})")
    budget.left -= len(old or b"") + len(new or b"")
    return FileDiff(change, _decoded(old), _decoded(new))


def _binary(data: bytes | None) -> bool:
    return data is not None and b"\0" in data[:_BINARY_PROBE]


def _decoded(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _sizes(old: bytes | None, new: bytes | None) -> str:
    def size(data: bytes | None) -> str:
        return "absent" if data is None else f"{len(data):,} bytes"

    return f"{size(old)} → {size(new)}"


def _stored(diff: ResourceDiff) -> dict[str, Any]:
    return {
        "resource_id": diff.resource_id,
        "old_ref": diff.old_ref,
        "new_ref": diff.new_ref,
        "note": diff.note,
        "files": [
            {
                "path": f.change.path,
                "kind": f.change.kind.value,
                "old": f.old,
                "new": f.new,
                "summary": f.summary,
            }
            for f in diff.files
        ],
    }


# -- reading (plan diff, the app's diff view) --------------------------------------------


def correction_diff(store: Store, correction_ref: str) -> CorrectionDiff:
    """The diff recorded for a correction: the same every time it is asked for."""
    correction_id = parse_ulid(correction_ref, "correction")
    with store.unit_of_work() as uow:
        correction = uow.corrections.get(correction_id)
        rows = uow.decisions.tree_rows(correction.plan_id, include_superseded=True)
    snapshots = correction.report.get("snapshots")
    if isinstance(snapshots, dict):
        by_id = {r.decision_id: r for r in rows}
        at_decision = snapshots.get("at_decision")
        return CorrectionDiff(
            correction,
            [by_id[i] for i in snapshots.get("superseded", []) if i in by_id],
            [by_id[i] for i in snapshots.get("replacements", []) if i in by_id],
            _loaded(snapshots.get("final")),
            _loaded(at_decision) if isinstance(at_decision, list) else None,
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


def _loaded(entries: object) -> list[ResourceDiff]:
    if not isinstance(entries, list):
        return []
    return [
        ResourceDiff(
            str(e["resource_id"]),
            str(e.get("old_ref") or ""),
            str(e.get("new_ref") or ""),
            [
                FileDiff(
                    Change(str(f["path"]), ChangeKind(f["kind"])),
                    f.get("old"),
                    f.get("new"),
                    f.get("summary"),
                )
                for f in e.get("files", [])
            ],
            e.get("note"),
        )
        for e in entries
        if isinstance(e, dict)
    ]
